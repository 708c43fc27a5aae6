"""Timed inference and data paths: attention kernels, vectorised rollouts, single-observation
latency and expert collection."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from vla.data.collect import collect
from vla.data.seeds import TEST_SEED_START
from vla.envs.reach import ReachEnv
from vla.eval.rollout import rollout
from vla.eval.runner import PolicyRunner
from vla.models.attention import MultiHeadAttention


def attention_speed(policy, batch_size: int, repeats: int = 10) -> dict:
    """Forward+backward seconds of one attention layer, naive vs fused, at the real length."""
    T, D = policy.num_tokens(), policy.d_model
    x = torch.randn(batch_size, T, D, requires_grad=True)
    times = {}
    for impl in ("naive", "sdpa"):
        attn = MultiHeadAttention(D, policy.encoder.n_heads, attn_impl=impl)
        for i in range(repeats + 3):
            if i == 3:
                start = time.perf_counter()
            attn(x).sum().backward()
        times[impl] = (time.perf_counter() - start) / repeats
    return dict(
        sdpa_vs_naive=times["naive"] / times["sdpa"],
        attn_ms_naive=1e3 * times["naive"],
        attn_ms_sdpa=1e3 * times["sdpa"],
    )


def rollout_speed(policy, env_kwargs: dict, episodes: int, num_envs: int) -> dict:
    """Env steps/s: vectorised envs with batched inference vs one env, one call per step."""
    start = time.perf_counter()
    result = rollout(policy, env_kwargs, episodes, TEST_SEED_START, num_envs=num_envs)
    vec_steps = int(result.steps.sum())
    vec = vec_steps / (time.perf_counter() - start)
    env, runner = ReachEnv(**env_kwargs), PolicyRunner(policy)
    steps, start = 0, time.perf_counter()
    for e in range(max(episodes // 5, 2)):
        obs, _ = env.reset(seed=TEST_SEED_START + e)
        runner.reset()
        while True:
            obs, _, terminated, truncated, _ = env.step(runner.act(obs))
            steps += 1
            if terminated or truncated:
                break
    single = steps / (time.perf_counter() - start)
    return dict(
        rollout_speedup=vec / single,
        rollout_steps_per_s_vectorised=vec,
        rollout_steps_per_s_single=single,
    )


def latency(policy, env_kwargs: dict, samples: int) -> dict:
    """Percentiles of a query's `PolicyRunner.act` on one observation (the runner is reset
    before each, so every call queries the policy), after 10 untimed calls."""
    env, runner = ReachEnv(**env_kwargs), PolicyRunner(policy)
    obs, _ = env.reset(seed=TEST_SEED_START)
    times = []
    for i in range(samples + 10):
        runner.reset()
        start = time.perf_counter()
        runner.act(obs)
        if i >= 10:
            times.append(time.perf_counter() - start)
    return dict(
        latency_ms_p50=1e3 * float(np.percentile(times, 50)),
        latency_ms_p99=1e3 * float(np.percentile(times, 99)),
    )


def latency_beside(policy, other, env_kwargs: dict, samples: int) -> dict:
    """`latency` of `policy` and of `other` with their queries interleaved one by one, so a
    slow moment of the machine hits both: {p50 and p99 of each, and the ratio of p50s}."""
    env = ReachEnv(**env_kwargs)
    obs, _ = env.reset(seed=TEST_SEED_START)
    runners = PolicyRunner(policy), PolicyRunner(other)
    times: tuple[list, list] = ([], [])
    for i in range(samples + 10):
        for runner, record in zip(runners, times, strict=True):
            runner.reset()
            start = time.perf_counter()
            runner.act(obs)
            if i >= 10:
                record.append(time.perf_counter() - start)
    p50 = [1e3 * float(np.percentile(t, 50)) for t in times]
    return dict(
        latency_ms_p50=p50[0], latency_ms_p99=1e3 * float(np.percentile(times[0], 99)),
        other_latency_ms_p50=p50[1], other_latency_ms_p99=1e3 * float(np.percentile(times[1], 99)),
        other_vs_policy_latency=p50[1] / p50[0],
    )  # fmt: skip


def collect_speed(env_kwargs: dict, root: Path, episodes: int) -> dict:
    start = time.perf_counter()
    path = collect(env_kwargs, root / "bench-collect", episodes, progress=False)
    seconds = time.perf_counter() - start
    steps = json.loads((path / "meta.json").read_text())["num_steps"]
    return dict(collect_steps_per_s=steps / seconds, collect_episodes_per_s=episodes / seconds)
