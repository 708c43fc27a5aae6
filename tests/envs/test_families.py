import numpy as np
import pytest

from vla.envs import render
from vla.envs.expert import ScriptedExpert
from vla.envs.families import FAMILIES, named_pairs
from vla.envs.grammar import (
    COLOURS,
    HELD_OUT_PAIRS,
    HELD_OUT_RELATIONS,
    HELD_OUT_VERBS,
    PAIRS,
    RELATION_WORDS,
    UNKNOWN_VERBS,
    Name,
    Relation,
    Superlative,
    parse,
    relation_key,
)
from vla.envs.reach import ReachEnv
from vla.envs.referents import resolve
from vla.errors import ConfigError

HELD_NAMES = {PAIRS[p] for p in HELD_OUT_PAIRS}


def episodes(n: int = 300, **kwargs):
    env = ReachEnv(**kwargs)
    for seed in range(n):
        obs, info = env.reset(seed=seed)
        yield env, obs, info


@pytest.mark.parametrize("family", ["attribute", "relation"])
def test_every_generated_instruction_names_exactly_one_shape(family):
    seen = set()
    for env, obs, info in episodes(400, families=[family], num_targets=4):
        (ref,) = parse(obs["instruction"]).referents
        assert resolve(ref, env._pairs, env._centres) == info["target_index"]
        seen.add(type(ref).__name__ + getattr(ref, "relation", getattr(ref, "superlative", "")))
    if family == "relation":  # every relation word is drawn
        assert len(seen) == 9, seen


def test_info_names_the_relation_word_of_each_episode():
    words = []
    for _, obs, info in episodes(300, families=["relation", "name"]):
        (ref,) = parse(obs["instruction"]).referents
        if info["family"] == "relation":
            words.append(info["relation"])
            assert info["relation"] == getattr(ref, "relation", getattr(ref, "superlative", None))
        else:
            assert info["relation"] is None
    assert set(words) == set(RELATION_WORDS) and len(words) > 100


@pytest.mark.parametrize("asked", [["nearest"], ["leftmost", "below"]])
def test_relation_words_restricts_relation_instructions_to_those_words(asked):
    counts = dict.fromkeys(asked, 0)
    for env, obs, info in episodes(200, families=["relation"], relation_words=asked):
        (ref,) = parse(obs["instruction"]).referents
        word = getattr(ref, "relation", getattr(ref, "superlative", None))
        assert word == info["relation"] and word in asked
        assert resolve(ref, env._pairs, env._centres) == info["target_index"]
        counts[word] += 1
    assert min(counts.values()) >= 200 / len(asked) * 0.8  # each asked word about as often


def test_every_relation_word_asked_draws_the_same_episodes_as_none():
    every = list(episodes(100, families=["relation", "name"], relation_words=RELATION_WORDS))
    for (_, a, _), (_, b, _) in zip(
        every, episodes(100, families=["relation", "name"]), strict=True
    ):
        assert a["instruction"] == b["instruction"] and (a["image"] == b["image"]).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_scripted_expert_solves_every_family(family):
    expert, successes = ScriptedExpert(noise_std=0.3), []
    for env, obs, info in episodes(200, families=[family]):
        rng = np.random.default_rng(0)
        while True:
            executed, _ = expert.act(env, rng)
            obs, _, terminated, truncated, info = env.step(executed)
            if terminated or truncated:
                break
        successes.append(info["is_success"])
    assert np.mean(successes) >= 0.99


def test_a_sequence_succeeds_only_in_order_and_marks_what_is_done():
    env = ReachEnv(families=["sequence"], image_size=64)
    obs, info = env.reset(seed=0)
    first, second = env._targets
    colour = np.array(COLOURS[PAIRS[env._pairs[first]][0]], np.uint8)
    assert (obs["image"] == colour).all(-1).sum() > 0

    def jump(i):
        env._pos = env._centres[i].copy()
        return env.step(np.zeros(2, np.float32))

    obs, _, terminated, _, info = jump(second)  # the second shape first: nothing happens
    assert not terminated and info["targets_reached"] == 0
    obs, _, terminated, _, info = jump(first)
    assert not terminated and info["targets_reached"] == 1 and info["target_index"] == second
    assert (obs["image"] == colour).all(-1).sum() == 0  # the reached shape is dimmed now
    assert (obs["image"] == np.array(render.dimmed(tuple(colour)), np.uint8)).all(-1).sum() > 0
    obs, reward, terminated, _, info = jump(second)
    assert terminated and info["is_success"] and reward >= env.success_bonus


def test_demonstrations_of_the_training_split_hold_nothing_out(tmp_path):
    from vla.data.collect import collect
    from vla.data.dataset import load_demos

    env = dict(families=list(FAMILIES), image_size=16)
    demos = load_demos(collect(env, tmp_path, 600, progress=False))
    assert not set(demos.target_pair.tolist()) & set(HELD_OUT_PAIRS)  # never a target...
    chains, kinds = set(), set()
    for words in demos.instructions:
        instruction = parse(words)
        assert instruction.verb not in HELD_OUT_VERBS and instruction.verb not in UNKNOWN_VERBS
        chains.add(len(instruction.referents))
        for ref in instruction.referents:
            assert not set(named_pairs(ref)) & HELD_NAMES  # ... and never named
            if isinstance(ref, Relation | Superlative):
                assert relation_key(ref) not in HELD_OUT_RELATIONS
            kinds.add(type(ref).__name__)
    assert chains == {1, 2}  # sequences of two, never three
    assert kinds == {"Name", "Colour", "Shape", "Relation", "Superlative"}


def test_each_held_out_split_tests_what_it_says():
    for _, _, info in episodes(100, split="novel_pairs"):
        assert info["target_pair"] in HELD_OUT_PAIRS
    for _, obs, _ in episodes(100, families=["relation"], split="novel_pairs"):
        (ref,) = parse(obs["instruction"]).referents
        assert isinstance(ref.reference, Name) and set(named_pairs(ref)) <= HELD_NAMES
    for _, obs, _ in episodes(100, families=["relation"], split="novel_relations"):
        assert relation_key(parse(obs["instruction"]).referents[0]) in HELD_OUT_RELATIONS
    for _, obs, _ in episodes(100, families=["name", "attribute"], split="novel_verbs"):
        assert parse(obs["instruction"]).verb in HELD_OUT_VERBS
    for _, obs, _ in episodes(100, split="unknown_words"):
        assert parse(obs["instruction"]).verb in UNKNOWN_VERBS
    for _, obs, info in episodes(100, families=["sequence"], chain_length=3):
        assert len(parse(obs["instruction"]).referents) == 3 == info["targets"]


def test_a_typed_instruction_gets_a_scene_that_has_what_it_names():
    env = ReachEnv()
    for seed in range(50):
        obs, info = env.reset(seed=seed, options={"instruction": "touch the leftmost circle"})
        assert obs["instruction"] == "touch the leftmost circle" and info["targets"] == 1
        circles = [i for i, p in enumerate(env._pairs) if PAIRS[p][1] == "circle"]
        assert info["target_index"] == min(circles, key=lambda i: env._centres[i, 0])
    obs, info = env.reset(seed=0, options={"instruction": "dance a little"})
    assert info["targets"] == 0 and info["family"] == "typed"
    for _ in range(env.max_episode_steps):
        *_, terminated, truncated, info = env.step(np.zeros(2, np.float32))
    assert truncated and not terminated and not info["is_success"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"families": ["name", "colour"]}, r"env.families=\['name', 'colour'\] has unknown"),
        ({"families": ["relation"], "num_targets": 1}, "num_targets=1 must be >= 2"),
        ({"families": ["sequence"], "num_targets": 2, "chain_length": 3}, "chain_length=3"),
        ({"chain_length": 5}, "chain_length=5"),
        ({"held_out_pairs": list(range(12))}, "leave at least one pair"),
        ({"held_out_verbs": ["touch", "go and touch", "find and touch"]}, r"words \['touch'\]"),
        ({"held_out_relations": ["inside:red one"]}, "'inside:red one'"),
        ({"split": "novel_pairs", "held_out_pairs": []}, "env.held_out_pairs, which is empty"),
        ({"split": "novel_relations"}, "must be\n?.*relation"),
        ({"split": "novel_combos"}, "env.split='novel_combos'"),
        (
            {"relation_words": ["closest"]},
            r"unknown words \['closest'\]: expected a non-empty list of left of, right of, "
            "above, below, nearest, leftmost, rightmost, topmost, bottommost",
        ),
        ({"relation_words": []}, r"env.relation_words=\[\] has unknown words"),
        (
            {"families": ["relation"], "split": "novel_pairs", "relation_words": ["leftmost"]},
            "leaves env.split=novel_pairs no relation to ask: its relations use left of, right "
            "of, above, below, nearest",
        ),
    ],
)
def test_a_configuration_that_cannot_be_built_gets_one_line_naming_it(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ReachEnv(**kwargs)


def test_evaluations_can_change_every_env_key_and_nothing_else(compose_cfg):
    trained = compose_cfg("train").env
    as_trained = compose_cfg("eval", ["ckpt_path=x"]).env
    assert set(as_trained) == set(trained) - {"_target_"}
    assert all(v is None for v in as_trained.values())
    changed = compose_cfg("eval", ["ckpt_path=x", "env.num_targets=4", "env.families=[relation]"])
    from vla.envs.config import env_changes

    assert env_changes(changed.env) == {"num_targets": 4, "families": ["relation"]}
