"""FLOPs per sample, counted by torch on a real forward: the marginal cost of one sample, what
a query adds for sampling and decoding, and longer instructions costing more."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from vla import keys
from vla.benchmark.flops import naive_attention, query_flops, training_flops


def counted(policy, fn) -> int:
    with FlopCounterMode(display=False) as counter, naive_attention(policy):
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize(
    "overrides",
    [
        ["model/head=continuous"],
        ["model.readout.mode=cross"],
        ["model/head=flow", "model.chunk_size=4", "model.head.flow_steps=3"],
        ["model/objects=slots"],
    ],
)
def test_a_samples_flops_are_a_batch_of_four_less_a_batch_of_three(
    make_policy, make_batch, overrides
):
    """The per-sample figure scales to a batch: counting 4 and 3 samples of a real batch
    differs by exactly the reported forward (the per-batch coordinate embedding cancels)."""
    policy = make_policy("tiny", *overrides).eval()
    batch = make_batch(policy, batch_size=4)
    L = batch[keys.TOKENS].shape[1]
    target = torch.zeros(4, policy.chunk_size, policy.action_dim)

    def step(n):
        image, state, tokens = (batch[k][:n] for k in (keys.IMAGE, keys.STATE, keys.TOKENS))
        policy.head.loss(policy.encode(image, state, tokens).features, target[:n])

    assert training_flops(policy, L) == counted(policy, lambda: step(4)) - counted(
        policy, lambda: step(3)
    )
    assert training_flops(policy) > training_flops(policy, L)  # the most words cost more


def test_a_query_costs_more_than_a_training_pass_only_for_sampling_and_decoding(make_policy):
    """flow: flow_steps denoiser passes instead of one; autoregressive: K*A decoding passes
    instead of one teacher-forced pass; discrete: the same pass either way."""
    discrete = make_policy("tiny")
    assert query_flops(discrete) == training_flops(discrete)
    one, seven = (
        make_policy("tiny", "model/head=flow", f"model.head.flow_steps={n}") for n in (1, 7)
    )
    denoiser = query_flops(seven) - query_flops(one)  # six more denoiser passes
    assert denoiser > 0 and query_flops(one) == training_flops(one)
    assert query_flops(seven) == training_flops(seven) + denoiser
    ar = make_policy("tiny", "model/head=autoregressive", "model.chunk_size=3")
    assert query_flops(ar) > training_flops(ar)


def test_counting_draws_no_random_numbers(make_policy):
    """Counted before training (train.py logs it), it must leave the seed's stream as it was."""
    policy = make_policy("tiny", "model/head=flow")
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    training_flops(policy), query_flops(policy)
    assert torch.equal(torch.rand(3), expected)
