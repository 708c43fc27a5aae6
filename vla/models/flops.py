"""Analytic FLOPs of a policy, per sample: what a training step runs and what a query runs.

Counted as 2 x multiply-adds of the matmuls; elementwise ops, norms and softmax are left out
(a few percent at these sizes). A training step runs the encoder once and the head's loss
(one pass: teacher forcing, one denoiser evaluation), then the backward pass, about twice the
forward; a query (rollouts, and the validation metric `action_mse`) runs the encoder and the
head's `predict`, which for the flow head is `flow_steps` denoiser passes and for the
autoregressive head K*A decoding passes. MFU is computed from the training figure.
"""

from __future__ import annotations

from vla.models.policy import VLAPolicy


def encoder_flops(policy: VLAPolicy, num_words: int | None = None) -> int:
    """Everything before the head: tokenising the inputs, the Transformer and the readout,
    for instructions of `num_words` words (None: the most the tokenizer keeps)."""
    layout = policy.token_layout(num_words)
    conditioning = policy.film.flops() if policy.film is not None else 0
    conditioning += policy.keypoints.flops() if policy.keypoints is not None else 0
    if policy.relations is not None:  # the reference's map and the bias on keypoint 0's
        words = layout["text"].stop - layout["text"].start
        pixels = policy.keypoints.image_size**2
        conditioning += policy.relations.flops(words, pixels, policy.keypoints.hidden)
    return (
        policy.image_encoder.flops()
        + conditioning
        + policy.text_encoder.flops(layout["text"].stop - layout["text"].start)
        + policy.state_encoder.flops()
        + policy.encoder.flops(policy.num_tokens(num_words))
        + policy.readout.flops(layout["state"].stop)  # its queries attend to T_obs tokens
    )


def training_flops(policy: VLAPolicy, num_words: int | None = None) -> int:
    """Forward FLOPs of one sample in a training step (x3 with the backward pass)."""
    return encoder_flops(policy, num_words) + policy.head.flops()


def query_flops(policy: VLAPolicy, num_words: int | None = None) -> int:
    """Forward FLOPs of one observation's query: `predict_chunk_tensors`."""
    return encoder_flops(policy, num_words) + policy.head.predict_flops()
