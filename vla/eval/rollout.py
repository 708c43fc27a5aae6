"""Closed-loop evaluation: many seeded episodes in a `gymnasium.vector` env, run by a
`PolicyRunner`: one batched policy call per step for the envs that need a new action chunk
(all of them when the policy predicts one action per query)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from tqdm.auto import tqdm

from vla.console import bar_shown
from vla.envs import render
from vla.envs.grammar import PAIRS
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.eval.runner import PolicyRunner
from vla.eval.stats import rate_summary
from vla.keys import INSTRUCTION
from vla.models.policy import VLAPolicy

ABLATIONS = ("language", "image", "state")
NEUTRAL_INSTRUCTION = "go to the"  # names no colour and no shape


@dataclass
class Rollouts:
    """Per-episode outcomes of an evaluation, plus recorded frames of the first few episodes."""

    seeds: np.ndarray  # [N]
    success: np.ndarray  # [N] bool
    steps: np.ndarray  # [N] steps until success or truncation
    queries: np.ndarray  # [N] policy queries (predicted chunks) the episode used
    target_pair: np.ndarray  # [N] index into PAIRS of the (first) shape to reach; -1: none
    families: np.ndarray  # [N] str: the instruction's family ("typed" if outside the grammar)
    relations: np.ndarray  # [N] object: a relation instruction's word ("nearest", ...), or None
    instructions: list[str]
    frames: list[list[np.ndarray]] = field(default_factory=list)  # render frames per episode

    def metrics(self) -> dict:
        """Success with its 95% interval and episode count, overall and by family, colour and
        shape of the (first) shape to reach and relation word (relation episodes only); mean
        steps and policy queries."""
        breakdowns = {"family": np.asarray(self.families, dtype=str)}
        for key, pick in (("colour", 0), ("shape", 1)):
            breakdowns[key] = np.array(
                [PAIRS[p][pick] if p >= 0 else "-" for p in self.target_pair]
            )
        breakdowns["relation"] = np.array([w or "" for w in self.relations], dtype=str)
        by = {
            f"success_by_{key}": {
                name: rate_summary(
                    int(self.success[names == name].sum()), int(np.sum(names == name))
                )
                for name in sorted(set(names) - {""})
            }
            for key, names in breakdowns.items()
        }
        return {
            **rate_summary(int(self.success.sum()), len(self.success)),
            "mean_steps": float(self.steps.mean()),
            "mean_queries": float(self.queries.mean()),
            "mean_steps_success": float(self.steps[self.success].mean())
            if self.success.any()
            else None,
            **by,
        }

    def episodes(self) -> list[dict]:
        """One record per episode, by seed: what a paired comparison or a breakdown of
        one's own needs."""
        return [
            dict(
                seed=int(self.seeds[i]),
                success=bool(self.success[i]),
                steps=int(self.steps[i]),
                family=str(self.families[i]),
                relation=self.relations[i],
            )
            for i in range(len(self.seeds))
        ]


def check_ablations(ablate: Sequence[str]) -> tuple[str, ...]:
    unknown = sorted(set(ablate) - set(ABLATIONS))
    if unknown:
        raise ConfigError(
            f"eval.ablate={list(ablate)} has unknown entries {unknown}: "
            f"expected a subset of {list(ABLATIONS)}"
        )
    return tuple(ablate)


def ablate_inputs(policy: VLAPolicy, image, state, tokens, ablate: Sequence[str]):
    """Replaces the named modalities with uninformative inputs: a blank arena (no targets, no
    effector), the training-mean state, and an instruction that names nothing."""
    if "image" in ablate:
        image = torch.empty_like(image)
        image[:] = torch.tensor(render.BACKGROUND, dtype=image.dtype)
    if "state" in ablate:
        state = policy.normalizer.state_mean.to(state).expand_as(state).clone()
    if "language" in ablate:
        neutral = policy.tokenizer.encode([NEUTRAL_INSTRUCTION]).to(tokens.device)
        tokens = neutral.expand(len(tokens), -1).clone()
    return image, state, tokens


def rollout(
    policy: VLAPolicy,
    env_kwargs: dict,
    num_episodes: int,
    seed: int,
    num_envs: int = 50,
    record: int = 0,
    ablate: Sequence[str] = (),
    progress: bool = False,
    n_action_steps: int | None = None,
    temporal_ensemble_coeff: float | None = None,
    options: dict | None = None,
) -> Rollouts:
    """Runs `num_episodes` episodes with seeds `seed, seed+1, ...` in waves of `num_envs`.

    Args:
        record: number of episodes (the first ones) whose rendered frames are kept.
        ablate: modalities to replace with uninformative inputs (see `ablate_inputs`).
        n_action_steps: actions executed per predicted chunk (None: the policy's own).
        temporal_ensemble_coeff: query every step and blend the overlapping chunks with
            weights exp(-m * i), oldest first (ACT); None executes chunks as they come.
        options: passed to every episode's reset (e.g. {"instruction": text}: instruct that).
    """
    if num_episodes < 1:
        raise ConfigError(f"eval.num_episodes={num_episodes} must be >= 1")
    ablate = check_ablations(ablate)
    transform = functools.partial(ablate_inputs, policy, ablate=ablate) if ablate else None
    policy.reset()  # a sampling head starts its noise afresh: the same evaluation every time
    make = functools.partial(ReachEnv, **{**env_kwargs, "render_mode": "rgb_array"})
    out = {k: [] for k in ("success", "steps", "queries", "target_pair", "families", "relations")}
    instructions: list[str] = []
    frames: list[list[np.ndarray]] = []
    bar = tqdm(
        total=num_episodes, desc="rollouts", unit="ep", disable=not progress or not bar_shown()
    )
    for start in range(0, num_episodes, num_envs):
        n = min(num_envs, num_episodes - start)
        envs = SyncVectorEnv([make] * n, autoreset_mode=AutoresetMode.DISABLED, copy=False)
        obs, info = envs.reset(seed=[seed + start + i for i in range(n)], options=options)
        texts = list(obs[INSTRUCTION])
        runner = PolicyRunner(policy, n, n_action_steps, temporal_ensemble_coeff, transform)
        keep = min(max(record - start, 0), n)
        wave_frames = [[envs.envs[i].render()] for i in range(keep)]
        done = np.zeros(n, dtype=bool)
        success = np.zeros(n, dtype=bool)
        steps = np.zeros(n, dtype=np.int64)
        queries = np.zeros(n, dtype=np.int64)
        for t in itertools.count():  # every episode ends: the env truncates it
            # finished episodes need no more inference, and stand still
            action = runner.act(obs, active=np.flatnonzero(~done))  # [n,A]
            obs, _, terminated, truncated, _ = envs.step(action)
            for i in range(keep):
                if not done[i]:
                    wave_frames[i].append(envs.envs[i].render())
            newly = ~done & (terminated | truncated)
            success[newly] = terminated[newly]
            steps[newly] = t + 1
            queries[newly] = runner.queries[newly]
            done |= newly
            if done.all():
                break
            ended = terminated | truncated
            if ended.any():  # vector envs refuse to step an ended env: restart it; its new
                obs, _ = envs.reset(options={"reset_mask": ended})  # episode is never counted
                runner.reset(ended)  # and nothing of the old episode's chunk carries over
        envs.close()
        out["success"].append(success)
        out["steps"].append(steps)
        out["queries"].append(queries)
        out["target_pair"].append(np.asarray(info["first_target_pair"]))
        out["families"].append(np.asarray(info["family"], dtype=str))
        out["relations"].append(np.asarray(info["relation"], dtype=object))
        instructions += texts
        frames += wave_frames
        bar.update(n)
    bar.close()
    return Rollouts(
        seeds=np.arange(seed, seed + num_episodes),
        success=np.concatenate(out["success"]),
        steps=np.concatenate(out["steps"]),
        queries=np.concatenate(out["queries"]),
        target_pair=np.concatenate(out["target_pair"]),
        families=np.concatenate(out["families"]),
        relations=np.concatenate(out["relations"]),
        instructions=instructions,
        frames=frames,
    )
