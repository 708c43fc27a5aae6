"""FLOPs of a policy per sample, counted by torch: what a training step runs and what a query
runs.

`torch.utils.flop_counter.FlopCounterMode` counts the matmuls, convolutions and attention
(2 per multiply-add) of a real forward, so every part is counted as it runs, and a new part
needs no formula of its own. The count is taken at batch sizes 2 and 1 and differenced: a
sample's marginal cost, without the work done once per batch (the patch coordinates'
embedding). Attention is counted on its written-out path (`naive_attention`): torch counts
no FLOPs for the CPU's fused kernel, though it does the same work. A training step runs the encoder and the head's loss (teacher forcing, one
denoiser evaluation), then the backward pass, about twice the forward; a query runs the
encoder and the head's `predict` (`flow_steps` denoiser passes, K*A decoding passes). MFU is
computed from the training figure.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import torch
from torch.utils.flop_counter import FlopCounterMode

from vla.models.attention import MultiHeadAttention
from vla.models.policy import VLAPolicy
from vla.vlm.model import VLMPolicy


@contextmanager
def naive_attention(model: torch.nn.Module):
    """Every attention layer of `model` on its written-out path inside, as it was after."""
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    impls = [m.attn_impl for m in layers]
    try:
        for m in layers:
            m.attn_impl = "naive"
        yield
    finally:
        for m, impl in zip(layers, impls, strict=True):
            m.attn_impl = impl


def _inputs(policy: VLAPolicy, batch_size: int, num_words: int | None):
    """Zero images and states, and instructions of `num_words` real words (None: the most the
    tokenizer keeps), on the policy's device."""
    device = next(policy.parameters()).device
    side = policy.image_size if isinstance(policy, VLMPolicy) else policy.image_encoder.image_size
    L = policy.tokenizer.max_len if num_words is None else num_words
    image = torch.zeros(batch_size, side, side, 3, dtype=torch.uint8, device=device)
    state = torch.zeros(batch_size, policy.normalizer.state_dim, device=device)
    tokens = torch.full((batch_size, L), policy.tokenizer.vocab_size - 1, device=device)
    return image, state, tokens


def _per_sample(policy: VLAPolicy, run: Callable, num_words: int | None) -> int:
    """FLOPs of run(image, state, tokens) for one more sample (batch of 2 minus batch of 1)."""
    counts = []
    was_training = policy.training
    # with autograd on: torch's counter fails on a parameter-derived input under no_grad. A
    # flow head's noise draws from the global stream: fork it, so counting consumes none
    with torch.random.fork_rng(), naive_attention(policy.eval()):
        for batch_size in (1, 2):
            with FlopCounterMode(display=False) as counter:
                run(*_inputs(policy, batch_size, num_words))
            counts.append(counter.get_total_flops())
    policy.train(was_training)
    return counts[1] - counts[0]


def training_flops(policy: VLAPolicy, num_words: int | None = None) -> int:
    """Forward FLOPs of one sample in a training step (x3 with the backward pass)."""

    def step(image, state, tokens):
        if isinstance(policy, VLMPolicy):  # teacher forcing over the longest suffix
            suffix = torch.full((len(image), policy.max_suffix), policy.tokenizer.bos_id)
            has_state = torch.ones(len(image), dtype=torch.bool)
            policy.suffix_logits(
                image, state, tokens, has_state.to(image.device), suffix.to(tokens)
            )
            return
        features = policy.encode(image, state, tokens).features
        target = torch.zeros(len(image), policy.chunk_size, policy.action_dim)
        policy.head.loss(features, target.to(features))

    return _per_sample(policy, step, num_words)


def query_flops(policy: VLAPolicy, num_words: int | None = None) -> int:
    """Forward FLOPs of one observation's query: `predict_chunk_tensors`."""

    def query(image, state, tokens):
        if isinstance(policy, VLMPolicy):  # the prefix once, then K*A cached decoding steps
            policy.predict_chunk_tensors(image, state, tokens)
            return
        policy.predict_chunk(policy.encode(image, state, tokens).features)

    return _per_sample(policy, query, num_words)
