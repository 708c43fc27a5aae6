"""The analytic FLOPs agree with a counted forward: what a training step runs, and what a
query runs (the flow head's Euler steps, the autoregressive head's decoding passes)."""

import pytest
from torch.utils.flop_counter import FlopCounterMode

from vla import keys
from vla.models.flops import query_flops, training_flops


def counted(fn) -> float:
    """FLOPs of fn() as torch counts them: matmuls and convolutions, 2 per multiply-add."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize(
    "overrides",
    [
        ["model/head=continuous"],
        ["model/head=discrete"],
        ["model.readout.mode=cross"],
        ["model/head=autoregressive", "model.chunk_size=2"],
        ["model/head=flow", "model.chunk_size=4", "model.head.flow_steps=3"],
        ["model.chunk_size=4"],
        ["model.keypoints.kernel_size=3", "model/film=none"],
    ],
)
def test_flops_match_a_counted_forward(make_policy, make_batch, overrides):
    policy = make_policy("tiny", *overrides, "model.attn_impl=naive").eval()
    B = 2
    batch = make_batch(policy, batch_size=B)
    target = policy.normalizer.normalize_action(batch[keys.ACTION])[:, None]  # [B,1,A]
    target = target.expand(-1, policy.chunk_size, -1).contiguous()  # [B,K,A]
    image, state, tokens = batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS]
    features = policy.encode(image, state, tokens).features.detach()
    encoder = counted(lambda: policy.encode(image, state, tokens))
    train_head = counted(lambda: policy.head.loss(features, target))  # what a step runs
    query_head = counted(lambda: policy.head.predict(features))  # what a query runs
    enc = policy.image_encoder  # coordinate embedding: once per batch, not per sample
    per_batch = 2 * enc.num_patches * enc.patch_size**2 * 2 * enc.d_model
    encoder_per_sample = (encoder - per_batch) / B
    assert policy.head.flops() == pytest.approx(train_head / B, rel=0.01)
    assert policy.head.predict_flops() == pytest.approx(query_head / B, rel=0.01)
    L = tokens.shape[1]  # the batch's longest instruction
    expected_train, expected_query = (
        encoder_per_sample + train_head / B,
        encoder_per_sample + query_head / B,
    )
    assert training_flops(policy, L) == pytest.approx(expected_train, rel=0.01)
    assert query_flops(policy, L) == pytest.approx(expected_query, rel=0.01)
    assert training_flops(policy) > training_flops(policy, L)  # the most words cost more


def test_a_query_costs_more_than_a_training_pass_only_for_sampling_and_decoding(make_policy):
    """The ratios the heads' docstrings promise: flow_steps denoiser passes; K*A decoding
    passes over 1..K*A positions against one teacher-forced pass over K*A."""
    flow = make_policy("tiny", "model/head=flow", "model.head.flow_steps=7").head
    assert flow.predict_flops() == 7 * flow.flops()
    discrete = make_policy("tiny").head
    assert discrete.predict_flops() == discrete.flops()
    ar = make_policy("tiny", "model/head=autoregressive", "model.chunk_size=3").head
    assert ar.predict_flops() == sum(ar._pass_flops(j) for j in range(1, 7))
    assert ar.predict_flops() > 3 * ar.flops()  # 6 passes, of 3.5 positions on average


def test_the_relational_keypoint_costs_what_it_counts(make_policy, make_batch):
    """Counted with and without model/relations, the difference is its own count (too small
    a share of the whole for the test above to see)."""
    plain = make_policy("tiny", "model.attn_impl=naive").eval()
    rel = make_policy("tiny", "model.attn_impl=naive", "model/relations=offset").eval()
    batch = make_batch(plain, batch_size=2)
    image, state, tokens = batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS]
    extra = counted(lambda: rel.encode(image, state, tokens)) - counted(
        lambda: plain.encode(image, state, tokens)
    )
    assert training_flops(rel, tokens.shape[1]) - training_flops(plain, tokens.shape[1]) == (
        pytest.approx(extra / 2, rel=0.01)
    )
