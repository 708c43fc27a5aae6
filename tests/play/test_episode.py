"""The playground's episodes are evaluation's: same outcome as `rollout` on the same seed,
the chunk shown is the one executed, and the attention is the query's."""

import numpy as np
import pytest
import torch

from tests.play.conftest import SEEDS
from vla.envs.reach import ReachEnv
from vla.eval.rollout import NEUTRAL_INSTRUCTION, rollout
from vla.play.episode import Scene, play, scene_options, unknown_words


def scene(env_kwargs, seed, family="name"):
    return Scene(seed, env_kwargs["num_targets"], env_kwargs["shared_colours"], family)


def direct(policy, env_kwargs, sc, instruction=None, ablate=()):
    """The same episode through evaluation's rollout: (success, steps)."""
    kwargs = sc.env_kwargs(env_kwargs)
    options = scene_options(ReachEnv(**kwargs), sc, instruction)
    r = rollout(policy, kwargs, 1, sc.seed, num_envs=1, ablate=ablate, options=options)
    return bool(r.success[0]), int(r.steps[0])


@pytest.mark.parametrize("instruction", [None, "please reach the red circle"])
def test_outcomes_and_lengths_equal_a_direct_rollout_of_the_same_seeds(tiny, instruction):
    policy, env_kwargs = tiny
    played, rolled = [], []
    for seed in SEEDS:
        steps = list(play(policy, env_kwargs, scene(env_kwargs, seed), instruction))
        assert [s.t for s in steps] == list(range(len(steps)))  # a Step per env step, and t=0
        assert [s.done for s in steps] == [False] * (len(steps) - 1) + [True]
        played.append((steps[-1].success, steps[-1].t))
        rolled.append(direct(policy, env_kwargs, scene(env_kwargs, seed), instruction))
    assert played == rolled
    assert {ok for ok, _ in played} == {True, False}  # both outcomes happen: the flag is read


@pytest.mark.parametrize("ablate", [("language",), ("image",), ("state",)])
def test_ablated_replays_equal_ablated_rollouts(tiny, ablate):
    policy, env_kwargs = tiny
    for seed in list(SEEDS)[:4]:
        steps = list(play(policy, env_kwargs, scene(env_kwargs, seed), None, ablate))
        assert (steps[-1].success, steps[-1].t) == direct(
            policy, env_kwargs, scene(env_kwargs, seed), None, ablate
        )
    if ablate == ("language",):  # the policy read the neutral instruction, not the scene's
        assert steps[0].query.words == NEUTRAL_INSTRUCTION.split()
        assert steps[0].instruction != NEUTRAL_INSTRUCTION


def test_the_chunk_shown_is_the_chunk_executed(chunked):
    policy, env_kwargs = chunked
    steps = list(play(policy, env_kwargs, scene(env_kwargs, SEEDS[0])))
    max_step = env_kwargs["max_step"]
    assert len(steps) == 11  # untrained: truncated after max_episode_steps=10
    assert [s.query.step for s in steps[:-1]] == [0, 0, 2, 2, 4, 4, 6, 6, 8, 8]  # 2 per query
    for now, after in zip(steps, steps[1:], strict=False):
        assert now.query.chunk.shape == (4, 2)
        moved = (after.position - now.position) / max_step
        action = now.query.chunk[now.t - now.query.step]
        inside = (after.position > 0) & (after.position < 1)  # the walls clip a step
        np.testing.assert_allclose(moved[inside], action[inside], atol=1e-4)


def test_attention_is_the_readouts_over_the_query_keys(tiny):
    policy, env_kwargs = tiny
    step = next(play(policy, env_kwargs, scene(env_kwargs, SEEDS[0]), "reach the red circle"))
    layout = step.query.layout
    assert step.query.words == ["reach", "the", "red", "circle"]
    assert layout["text"].stop - layout["text"].start == 4
    keys = max(s.stop for s in layout.values())
    assert len(step.query.attention) >= 1
    for _, w in step.query.attention:  # [H,T_keys], one per layer
        assert w.shape[1] == keys
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)


def test_unknown_words_are_those_without_an_id_and_those_past_max_len(tiny):
    policy, _ = tiny
    assert unknown_words(policy, "Please, reach the red circle!") == ["please"]
    assert unknown_words(policy, "reach the red circle") == []
    long = " ".join(["the"] * policy.tokenizer.max_len + ["red", "circle"])
    assert unknown_words(policy, long) == ["red", "circle"]  # dropped by the tokenizer


def test_a_typed_instruction_redraws_the_scene_until_it_has_what_it_names(tiny):
    policy, env_kwargs = tiny
    sc = scene(env_kwargs, SEEDS[0])
    own = next(play(policy, env_kwargs, sc)).instruction
    assert next(play(policy, env_kwargs, sc, own)).info == next(play(policy, env_kwargs, sc)).info
    typed = next(play(policy, env_kwargs, sc, "reach the green square"))
    assert typed.instruction == "reach the green square" and typed.info["targets"] == 1
    nothing = next(play(policy, env_kwargs, sc, "make me a sandwich"))
    assert nothing.info["targets"] == 0  # outside the grammar: nothing to reach


@pytest.mark.parametrize("ablate", ["language", "image", "state"])
def test_an_ablated_input_is_what_the_policy_gets(tiny, monkeypatch, ablate):
    policy, env_kwargs = tiny
    seen, predict = [], policy.predict_chunk_tensors
    monkeypatch.setattr(
        policy, "predict_chunk_tensors", lambda *x: seen.append(x) or predict(*x)
    )  # fmt: skip
    list(play(policy, env_kwargs, scene(env_kwargs, SEEDS[0]), None, (ablate,)))
    image, state, tokens = seen[0]
    neutral = policy.tokenizer.encode([NEUTRAL_INSTRUCTION])
    assert (tokens.tolist() == neutral.tolist()) == (ablate == "language")
    assert bool((image == image[0, 0, 0]).all()) == (ablate == "image")  # a blank arena
    mean = policy.normalizer.state_mean.expand_as(state)
    assert bool(torch.equal(state, mean)) == (ablate == "state")


def test_a_vlm_plays_as_its_rollout_and_shows_its_bos_query_and_keypoints(vlm):
    policy, env_kwargs = vlm
    played = [list(play(policy, env_kwargs, scene(env_kwargs, seed))) for seed in SEEDS[:4]]
    rolled = [direct(policy, env_kwargs, scene(env_kwargs, seed)) for seed in SEEDS[:4]]
    assert [(steps[-1].success, steps[-1].t) for steps in played] == rolled
    query = played[0][0].query
    K = policy.vision.num_tokens - 2  # the eyes: K keypoints and 2 pooled tokens
    assert query.keypoints.shape == (K, 2)
    assert ((query.keypoints >= 0) & (query.keypoints <= 1)).all()  # arena units
    layout, words = query.layout, query.words
    assert layout["text"].stop - layout["text"].start == len(words)  # a batch of one: no PAD
    assert len(query.attention) == len(policy.blocks)
    for _, w in query.attention:  # [H,T_keys]: the <bos> row over the eyes, words, state, itself
        assert w.shape[1] == layout["bos"].stop
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
        assert (w[:, layout["state"]] > 0).all()
