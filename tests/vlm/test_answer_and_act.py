"""Answer, then act: each episode's referent as the corpus's question, its answer about the
episode's own first frame, and the episode's outcome as evaluation measures it."""

import numpy as np
import pytest
import torch

from vla.checkpoint import load_policy
from vla.envs.grammar import PAIRS
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError, SeedRangeError
from vla.eval.rollout import rollout
from vla.vlm.answer_and_act import answer_and_act, main, referent_question, report


@pytest.mark.parametrize(
    "instruction, question",
    [
        ("go to the shape nearest the red circle", "what is the shape nearest the red circle"),
        ("please touch the leftmost circle", "what is the leftmost circle"),
        ("reach the blue square then the red circle", "what is the blue square"),
    ],
)
def test_the_question_is_the_instructions_referent_as_the_corpus_asks_it(instruction, question):
    assert referent_question(instruction) == question


def test_each_answer_is_about_its_episodes_first_frame_and_each_outcome_its_rollouts(vlm_ckpt):
    policy, env = load_policy(vlm_ckpt)
    env = {**env, "max_episode_steps": 5}  # an untrained policy: short episodes
    asker, _ = load_policy(vlm_ckpt)
    torch.manual_seed(0)
    with torch.no_grad():  # another VLM: the same one with its weights moved
        for p in asker.parameters():
            p.add_(torch.randn_like(p))
    seeds = range(1_000_000_040, 1_000_000_043)  # test episodes
    result = answer_and_act(policy, env, "nearest", episodes=3, seed=seeds[0], asker=asker)
    one_env = ReachEnv(**{**env, "families": ["relation"], "relation_words": ["nearest"]})
    for i, seed in enumerate(seeds):
        obs, info = one_env.reset(seed=seed)
        assert result["instructions"][i] == obs["instruction"] and "nearest" in obs["instruction"]
        assert result["targets"][i] == " ".join(PAIRS[info["first_target_pair"]])
        frame, question = torch.from_numpy(obs["image"])[None], [result["questions"][i]]
        assert result["answers"][i] == policy.answer(frame, question)[0]
        assert result["asker_answers"][i] == asker.answer(frame, question)[0]
    assert result["answers"] != result["asker_answers"]  # so the two above tell them apart
    kwargs = {**env, "families": ["relation"], "relation_words": ["nearest"]}
    assert result["success"] == rollout(policy, kwargs, 3, seeds[0]).success.tolist()
    text = report(result)
    assert text.startswith('3 "nearest" episodes (seeds 1000000040-1000000042)')
    assert "of 3" in text
    with pytest.raises(SeedRangeError, match="--seed=40 with 3 episodes"):
        answer_and_act(policy, env, "nearest", episodes=3, seed=40)  # demonstration seeds
    with pytest.raises(ConfigError, match="unknown words \\['nearst'\\]"):
        answer_and_act(policy, env, "nearst", episodes=3, seed=seeds[0])


def test_a_policy_that_cannot_answer_is_refused_in_one_line(tiny_ckpt, capsys):
    with pytest.raises(SystemExit) as stop:
        main([str(tiny_ckpt), "--episodes", "1", "--seed", "1000000000"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == f"{tiny_ckpt} is not a VLM: it cannot answer questions\n"


def test_the_report_splits_success_by_whether_the_answer_was_right():
    result = dict(word="nearest", seeds=[1, 2, 3, 4], targets=["red circle"] * 4,
                  answers=["red circle", "red circle", "blue square", "blue square"],
                  success=[True, False, False, False], asker_answers=None)  # fmt: skip
    lines = report(result).splitlines()
    assert lines[1].strip().startswith("answer names the shape to reach: 50.0%")
    assert lines[3].strip().startswith("succeeds when the answer is right: 50.0%")
    assert lines[4].strip().startswith("succeeds when the answer is wrong: 0.0%")
    assert np.isclose(float(lines[2].split(":")[1].split("%")[0]), 25.0)
