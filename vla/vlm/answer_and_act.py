"""Does the answer predict the action? Each episode's own referent is asked as a question on
its first frame ("reach the shape nearest the red circle" -> "what is the shape nearest the
red circle"), then the same checkpoint acts the episode out: RT-2's question, whether what the
VLM knows reaches its actions, one episode at a time.

    python -m vla.vlm.answer_and_act <checkpoint> --seed <first test seed> [--word nearest]
        [--episodes 300] [--asker <another checkpoint, e.g. the stage-1 VLM>]

Episodes are relation instructions of one word (`env.families=[relation]`,
`env.relation_words=[<word>]`) in the checkpoint's env, rolled out as evaluation rolls them out
(`vla.eval.rollout`). Prints how often the answer names the shape to reach and how often the
episode succeeds (95% intervals), success when the answer was right and when it was wrong,
and with --asker that checkpoint's answers about the same frames.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from vla.data.seeds import check_seeds
from vla.envs.config import check_relation_words
from vla.envs.grammar import PAIRS, RELATION_WORDS, parse, referent_text
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError, UserError
from vla.eval.rollout import rollout
from vla.eval.stats import format_rate
from vla.keys import IMAGE
from vla.vlm.model import VLMPolicy

BATCH = 64  # questions answered at once


def referent_question(instruction: str) -> str:
    """The corpus's question about an instruction's (first) referent."""
    return f"what is the {referent_text(parse(instruction).referents[0])}"


def first_frames(env_kwargs: dict, seeds) -> np.ndarray:
    """uint8 [N,H,W,3]: each seed's first observation, as the rollout's reset draws it."""
    env = ReachEnv(**env_kwargs)
    return np.stack([env.reset(seed=int(s))[0][IMAGE] for s in seeds])


def answers(policy, frames: np.ndarray, questions: list[str]) -> list[str]:
    """Greedy answers of `policy` (a VLM) to questions[i] about frames[i]."""
    out = []
    for i in range(0, len(questions), BATCH):
        out += policy.answer(torch.from_numpy(frames[i : i + BATCH]), questions[i : i + BATCH])
    return out


def answer_and_act(policy, env_config: dict, word: str, episodes: int, seed: int,
                   asker=None) -> dict:  # fmt: skip
    """Per episode: its instruction, question, the shape to reach, the answer (and the
    asker's), and whether the episode succeeded."""
    env_kwargs = {**env_config, "families": ["relation"], "relation_words": [word]}
    check_relation_words(env_kwargs)  # a word of the grammar that the env's split asks
    if episodes < 1:
        raise ConfigError(f"--episodes={episodes} must be >= 1")
    check_seeds("test", seed, episodes, "--seed")  # never the demonstrations' episodes
    run = rollout(policy, env_kwargs, episodes, seed)
    questions = [referent_question(text) for text in run.instructions]
    frames = first_frames(env_kwargs, run.seeds)
    return dict(
        word=word,
        seeds=run.seeds.tolist(),
        instructions=run.instructions,
        questions=questions,
        targets=[" ".join(PAIRS[p]) for p in run.target_pair],
        answers=answers(policy, frames, questions),
        asker_answers=answers(asker, frames, questions) if asker is not None else None,
        success=run.success.tolist(),
    )


def names_target(answers: list[str], targets: list[str]) -> np.ndarray:
    """bool [N]: whether each answer names its episode's shape to reach (word for word, as
    the held-out answers are scored)."""
    return np.array([a.split() == t.split() for a, t in zip(answers, targets, strict=True)])


def report(result: dict) -> str:
    """The rates `answer_and_act` measured, with their intervals, as printed."""
    right = names_target(result["answers"], result["targets"])
    success = np.array(result["success"])
    n = len(success)

    def rate(hits):
        return format_rate(float(hits.mean()), len(hits))

    lines = [
        f'{n} "{result["word"]}" episodes (seeds {result["seeds"][0]}-{result["seeds"][-1]})',
        f"  answer names the shape to reach: {rate(right)}",
        f"  episode succeeds: {rate(success)}",
        f"  succeeds when the answer is right: {rate(success[right])}" if right.any() else "",
        f"  succeeds when the answer is wrong: {rate(success[~right])}" if (~right).any() else "",
    ]
    if result["asker_answers"] is not None:
        asked = names_target(result["asker_answers"], result["targets"])
        lines.append(f"  --asker's answer names the shape to reach: {rate(asked)}")
    return "\n".join(line for line in lines if line)


def main(argv: list[str] | None = None) -> None:
    from vla.checkpoint import load_policy

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a stage-2 (experiment=rt2) checkpoint or folder")
    parser.add_argument("--word", default="nearest", choices=RELATION_WORDS,
                        help="the relation word of the episodes")  # fmt: skip
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--seed", type=int, required=True,
                        help="the first episode's, a test seed (>= 1000000000) no one has read")  # fmt: skip
    parser.add_argument("--asker", help="another VLM to ask about the same frames")
    args = parser.parse_args(argv)
    try:
        policy, env_config = load_policy(args.checkpoint)
        asker = load_policy(args.asker, need_env=False)[0] if args.asker else None
        for model, path in ((policy, args.checkpoint), (asker, args.asker)):
            if model is not None and not isinstance(model, VLMPolicy):
                raise UserError(f"{path} is not a VLM: it cannot answer questions")
        print(report(answer_and_act(policy, env_config, args.word, args.episodes, args.seed,
                                    asker)))  # fmt: skip
    except UserError as error:  # one line, status 2, as the scripts print it (vla.cli)
        parser.exit(2, f"{error}\n")


if __name__ == "__main__":
    main()
