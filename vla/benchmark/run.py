"""benchmark(cfg): every measurement repeated `bench.repeats` times with the compared sides
interleaved, so a slow moment of the machine hits both; medians are reported with their
spread (min, max over the repeats) under "spread"."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from vla.benchmark.flops import query_flops, training_flops
from vla.benchmark.inference import (
    attention_speed,
    collect_speed,
    latency,
    latency_beside,
    rollout_speed,
)
from vla.benchmark.report import format_results, goals_met
from vla.benchmark.training import lightning_loop, make_module, matmul_peak, torch_loop
from vla.config import CONF, check_group_choices, instantiate
from vla.envs.config import env_kwargs_of
from vla.errors import ConfigError
from vla.keys import TOKENS
from vla.runtime import configure_torch


def build(cfg: DictConfig, image_size: int | None = None):
    """(policy, datamodule) for the benchmark's model and data config."""
    cfg = cfg.copy()
    if image_size is not None:
        cfg.env.image_size = image_size
    policy = instantiate(cfg.model)
    module = make_module(cfg, policy)
    dm = instantiate(
        cfg.data,
        env=env_kwargs_of(cfg.env),
        tokenize=policy.tokenizer.encode,
        chunk_size=policy.chunk_size,
        target=module.uses_target,  # batches as the recipe's
        objects=module.uses_objects,
    )
    dm.prepare_data()
    dm.setup("fit")
    policy.set_normalization(**dm.statistics())
    return policy, dm


def beside_model(cfg: DictConfig, name: str):
    """The policy of `conf/model/<name>.yaml` at this env's image size, untrained (a query's
    cost does not depend on the weights)."""
    path = CONF / "model" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"bench.beside={name}: no conf/model/{name}.yaml")
    node = OmegaConf.load(path)
    node.pop("defaults", None)
    node.image_size = cfg.env.image_size
    return instantiate(node)


def words(dm) -> int:
    """Words per instruction in the demonstrations' batches (the longest instruction's)."""
    return dm.tensors[TOKENS].shape[1]


def medians(rounds: list[dict]) -> tuple[dict, dict]:
    """({key: median over rounds}, {key: [min, max]}) of a list of equally keyed dicts."""
    values = {k: [float(r[k]) for r in rounds] for k in rounds[0]}
    return (
        {k: float(np.median(v)) for k, v in values.items()},
        {k: [min(v), max(v)] for k, v in values.items()},
    )


def training_rounds(cfg: DictConfig, policy, dm) -> list[dict]:
    """Per repeat: the matmul peak, the plain loop and the Lightning loop, back to back."""
    b, train_flops = cfg.bench, 3 * training_flops(policy, words(dm))
    rounds = []
    for _ in range(b.repeats):
        peak = matmul_peak()
        plain = torch_loop(cfg, policy, dm, b.steps, b.warmup)
        light = lightning_loop(cfg, policy, dm, b.steps, b.warmup)
        rounds.append(
            dict(
                lightning_vs_torch=light["samples_per_s"] / plain["samples_per_s"],
                samples_per_s_lightning=light["samples_per_s"],
                samples_per_s_torch=plain["samples_per_s"],
                mfu=train_flops * light["samples_per_s"] / peak,
                matmul_peak_gflops=peak / 1e9,
                data_wait_fraction=light["data_wait_fraction"],
                data_wait_fraction_torch=plain["data_wait_fraction"],
            )
        )
    return rounds


def scaling(cfg: DictConfig, sizes, steps: int, warmup: int) -> list[dict]:
    """Training cost per sample as the image (so the token count) grows."""
    rows = []
    for size in sizes:
        policy, dm = build(cfg, image_size=size)
        speed = torch_loop(cfg, policy, dm, steps, warmup)["samples_per_s"]
        T, forward = policy.num_tokens(words(dm)), training_flops(policy, words(dm))
        attn_scores = 2 * 2 * T * T * policy.d_model * policy.encoder.depth  # QK^T, AV per sample
        rows.append(
            dict(
                image_size=size,
                tokens=T,
                us_per_sample=1e6 / speed,
                gflop_per_sample=3 * forward / 1e9,
                attention_score_share=attn_scores / forward,
            )
        )
    return rows


def scratch_data(cfg: DictConfig, scratch: Path) -> DictConfig:
    """cfg with its demonstrations in `scratch`, unless the user chose data.dir: timing sets
    (one per scaling image size) are of no use after the run and would pile up in data/."""
    if not OmegaConf.is_interpolation(cfg.data, "dir"):
        return cfg
    cfg = cfg.copy()
    cfg.data.dir = str(scratch)
    return cfg


def benchmark(cfg: DictConfig) -> dict:
    check_group_choices(cfg)
    configure_torch(cfg.get("threads"))
    b = cfg.bench
    if b.repeats < 1 or b.steps < 1:
        raise ConfigError(f"bench.repeats={b.repeats} and bench.steps={b.steps} must be >= 1")
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vla-benchmark-") as scratch:
        results = measure(scratch_data(cfg, Path(scratch)), Path(scratch))
    (out_dir / "benchmark.json").write_text(json.dumps(results, indent=2))
    print(format_results(results))
    print(f"written to {out_dir / 'benchmark.json'}")
    return results


def measure(cfg: DictConfig, scratch: Path) -> dict:
    """Every figure of the report; the collection timing writes its episodes in `scratch`."""
    b = cfg.bench
    torch.manual_seed(0)
    env_kwargs = env_kwargs_of(cfg.env)
    policy, dm = build(cfg)
    results = {
        "config": cfg.model._target_,
        "num_parameters": sum(p.numel() for p in policy.parameters()),
        "tokens": policy.num_tokens(words(dm)),
        "batch_size": dm.batch_size,
        "repeats": b.repeats,
        "train_gflop_per_sample": 3 * training_flops(policy, words(dm)) / 1e9,
        "query_gflop_per_sample": query_flops(policy, words(dm)) / 1e9,
    }
    rounds = training_rounds(cfg, policy, dm)
    for r in rounds:  # each of these compares two sides inside one call
        r |= attention_speed(policy, dm.batch_size)
        r |= rollout_speed(policy, env_kwargs, b.rollout_episodes, b.num_envs)
    middle, spread = medians(rounds)
    results |= middle | {"spread": spread}
    results |= latency(policy, env_kwargs, b.latency_samples)
    if b.get("beside") is not None:  # e.g. the VLM's query beside this policy's (docs/vlm.md)
        other = beside_model(cfg, b.beside)
        results["beside"] = dict(config=other.__class__.__name__, model=b.beside) | latency_beside(
            policy, other, env_kwargs, b.latency_samples
        )
    results |= collect_speed(env_kwargs, scratch, b.collect_episodes)
    results["scaling"] = scaling(cfg, list(b.scaling_sizes), b.scaling_steps, b.warmup)
    results["goals"] = goals_met(results)
    return results
