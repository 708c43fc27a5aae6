"""The prefix-LM mask, PAD keys, and KV-cache decoding against full recomputation."""

import torch

from tests.vlm.builders import inputs, small_policy
from vla.models.language import PAD_ID
from vla.vlm.prefix_lm import PrefixLMBlock, prefix_lm_allowed


def test_mask_is_bidirectional_over_the_prefix_causal_over_the_suffix():
    pad = torch.tensor([[False, False, False, False, False], [False, True, False, False, True]])
    allowed = prefix_lm_allowed(2, pad)  # P = 2, T = 5
    expected = torch.tensor(
        [
            [1, 1, 0, 0, 0],  # prefix rows see the whole prefix and no suffix
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],  # suffix rows: the prefix and the suffix up to themselves
            [1, 1, 1, 1, 0],
            [1, 1, 1, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert allowed.shape == (2, 1, 5, 5)
    assert torch.equal(allowed[0, 0], expected)
    assert torch.equal(allowed[1, 0], expected & torch.tensor([1, 0, 1, 1, 0], dtype=torch.bool))


def test_pad_keys_get_exactly_zero_weight_and_both_attention_paths_agree():
    torch.manual_seed(0)
    block = PrefixLMBlock(16, 2, attn_impl="naive").eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, True, False, False, True]])
    allowed = prefix_lm_allowed(2, pad)
    out, weights = block(x, allowed, need_weights=True)
    assert weights.shape == (2, 2, 5, 5)
    assert weights[1, :, :, 1].abs().max() == 0 and weights[1, :, :, 4].abs().max() == 0
    assert torch.allclose(weights.sum(-1), torch.ones(2, 2, 5))
    block.attn.attn_impl = "sdpa"
    assert torch.allclose(block(x, allowed), out, atol=1e-5)


def test_suffix_never_reaches_the_prefix_and_a_padded_state_is_never_read():
    policy = small_policy()
    image, state, tokens = inputs(policy)
    has_state = torch.tensor([False, True, False])
    suffix = torch.tensor([[policy.tokenizer.bos_id, 10, 11, 12]] * 3)
    logits = policy.suffix_logits(image, state, tokens, has_state, suffix)[0]  # [3,4,V]
    later = suffix.clone()
    later[:, 2] = 20  # a later suffix token changes only the logits from its position on
    changed = policy.suffix_logits(image, state, tokens, has_state, later)[0]
    assert torch.allclose(changed[:, :2], logits[:, :2], atol=1e-6)
    assert (changed[:, 2:] - logits[:, 2:]).abs().max() > 1e-3
    other = policy.suffix_logits(image, state * 5 + 1, tokens, has_state, suffix)[0]
    assert torch.allclose(other[[0, 2]], logits[[0, 2]], atol=1e-6)  # PAD state: not read
    assert (other[1] - logits[1]).abs().max() > 1e-3  # a real state is


def test_padding_words_change_nothing():
    policy = small_policy()
    image, state, tokens = inputs(policy)
    has_state = torch.ones(3, dtype=torch.bool)
    suffix = torch.tensor([[policy.tokenizer.bos_id, 10]] * 3)
    longer = torch.cat([tokens, torch.full((3, 4), PAD_ID)], dim=1)
    a = policy.suffix_logits(image, state, tokens, has_state, suffix)[0]
    b = policy.suffix_logits(image, state, longer, has_state, suffix)[0]
    assert torch.allclose(a, b, atol=1e-5)


def test_kv_cache_decoding_equals_full_recomputation():
    for seed in range(3):
        policy = small_policy(seed, chunk_size=4)
        image, state, tokens = inputs(policy, seed=seed)
        has_state = torch.tensor([True, False, True])
        for actions in (True, False):
            cached = policy.generate(image, state, tokens, has_state, 8, actions, cache=True)
            full = policy.generate(image, state, tokens, has_state, 8, actions, cache=False)
            n = cached.shape[1]  # answers may stop early once every row has its <eos>
            assert torch.equal(cached, full[:, :n])
            if actions:
                assert n == 8 and (cached >= policy.tokenizer.action_start).all()
            else:
                assert (cached < policy.tokenizer.action_start).all()


def test_predict_chunk_tensors_gives_chunks_in_range():
    policy = small_policy(chunk_size=3)
    image, state, tokens = inputs(policy)
    chunk = policy.predict_chunk_tensors(image, state, tokens)
    assert chunk.shape == (3, 3, 2) and chunk.abs().max() <= 1
