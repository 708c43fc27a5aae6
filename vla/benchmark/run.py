"""benchmark(cfg): speed figures measured side by side in one process, as ratios where the
machine's noise cancels out. See `python scripts/benchmark.py` and the README."""

from __future__ import annotations

import json
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from vla.config import instantiate
from vla.data.collect import collect, env_kwargs_of
from vla.data.datamodule import ReachDataModule
from vla.data.seeds import EVAL_SEED_START
from vla.envs.reach import ReachEnv
from vla.eval.rollout import rollout
from vla.runtime import configure_torch
from vla.training.module import BCModule


def build(cfg: DictConfig, image_size: int | None = None):
    """(policy, datamodule) for the benchmark's model and data config."""
    cfg = cfg.copy()
    if image_size is not None:
        cfg.env.image_size = image_size
    policy = instantiate(cfg.model.policy)
    dm = ReachDataModule(env=cfg.env, **cfg.data, tokenize=policy.tokenizer.encode)
    dm.prepare_data()
    policy.set_normalization(**dm.statistics())
    return policy, dm


def make_module(cfg: DictConfig, policy) -> BCModule:
    return BCModule(policy, instantiate(cfg.optimizer), instantiate(cfg.scheduler))


def torch_loop(cfg: DictConfig, policy, dm, steps: int, warmup: int) -> dict:
    """The reference: a plain PyTorch loop doing what the Lightning recipe does per step."""
    module = make_module(cfg, policy)
    optimizer = module.optimizer_factory(policy.parameters())
    scheduler = module.scheduler_factory(optimizer, total_steps=steps + warmup)
    batches = iter(_forever(dm.train_dataloader()))
    wait = 0.0
    for i in range(steps + warmup):
        if i == warmup:
            start, wait = time.perf_counter(), 0.0
        t = time.perf_counter()
        batch = next(batches)
        wait += time.perf_counter() - t
        loss, _ = policy(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.trainer.gradient_clip_val)
        optimizer.step()
        scheduler.step()
    seconds = time.perf_counter() - start
    return dict(samples_per_s=steps * dm.batch_size / seconds, data_wait_fraction=wait / seconds)


class _StepTimer(L.Callback):
    """Times the steps after `warmup`, and the gaps between steps (data fetch + loop)."""

    def __init__(self, warmup: int):
        self.warmup, self.start, self.end, self.gap, self.last_end = warmup, None, None, 0.0, None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.perf_counter()
        if batch_idx == self.warmup:
            self.start = now
        elif self.start is not None and self.last_end is not None:
            self.gap += now - self.last_end

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.last_end = self.end = time.perf_counter()


def lightning_loop(cfg: DictConfig, policy, dm, steps: int, warmup: int) -> dict:
    """The real Lightning recipe (same module, optimizer, schedule, clipping), timed."""
    timer = _StepTimer(warmup)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps + warmup,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        gradient_clip_val=cfg.trainer.gradient_clip_val,
        callbacks=[timer],
    )
    trainer.fit(make_module(cfg, policy), datamodule=dm)
    seconds = timer.end - timer.start
    return dict(
        samples_per_s=(steps - 1) * dm.batch_size / seconds, data_wait_fraction=timer.gap / seconds
    )


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
    """fp32 FLOP/s of a large torch.mm: this machine's practical peak."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def attention_speed(policy, batch_size: int, repeats: int = 10) -> dict:
    """Forward+backward seconds of one attention layer, naive vs fused, at the real length."""
    from vla.models.attention import MultiHeadAttention

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
        tokens=T,
    )


def rollout_speed(policy, env_kwargs: dict, episodes: int, num_envs: int) -> dict:
    """Env steps/s: vectorised envs with batched inference vs one env, one call per step."""
    start = time.perf_counter()
    result = rollout(policy, env_kwargs, episodes, EVAL_SEED_START, num_envs=num_envs)
    vec_steps = int(result.steps.sum())
    vec = vec_steps / (time.perf_counter() - start)
    env, steps, start = ReachEnv(**env_kwargs), 0, time.perf_counter()
    for e in range(max(episodes // 5, 2)):
        obs, _ = env.reset(seed=EVAL_SEED_START + e)
        policy.reset()
        while True:
            obs, _, terminated, truncated, _ = env.step(policy.predict_action(obs))
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
    env = ReachEnv(**env_kwargs)
    obs, _ = env.reset(seed=EVAL_SEED_START)
    times = []
    for i in range(samples + 10):
        start = time.perf_counter()
        policy.predict_action(obs)
        if i >= 10:
            times.append(time.perf_counter() - start)
    return dict(
        latency_ms_p50=1e3 * float(np.percentile(times, 50)),
        latency_ms_p99=1e3 * float(np.percentile(times, 99)),
    )


def collect_speed(env_kwargs: dict, root: Path, episodes: int) -> dict:
    start = time.perf_counter()
    path = collect(env_kwargs, root / "bench-collect", episodes, progress=False)
    seconds = time.perf_counter() - start
    steps = json.loads((path / "meta.json").read_text())["num_steps"]
    return dict(collect_steps_per_s=steps / seconds, collect_episodes_per_s=episodes / seconds)


def scaling(cfg: DictConfig, sizes, steps: int, warmup: int) -> list[dict]:
    """Training cost per sample as the image (so the token count) grows."""
    rows = []
    for size in sizes:
        policy, dm = build(cfg, image_size=size)
        speed = torch_loop(cfg, policy, dm, steps, warmup)["samples_per_s"]
        enc = policy.encoder
        T = policy.num_tokens()
        attn_scores = 2 * 2 * T * T * policy.d_model * enc.depth  # QK^T and AV, per sample
        rows.append(
            dict(
                image_size=size,
                tokens=T,
                us_per_sample=1e6 / speed,
                gflop_per_sample=3 * policy.flops_per_sample() / 1e9,
                attention_score_share=attn_scores / policy.flops_per_sample(),
            )
        )
    return rows


def benchmark(cfg: DictConfig) -> dict:
    configure_torch(cfg.get("threads"))
    b = cfg.bench
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    env_kwargs = env_kwargs_of(cfg.env)
    policy, dm = build(cfg)
    results = {
        "config": OmegaConf.to_container(cfg.model, resolve=True)["policy"]["_target_"],
        "num_parameters": sum(p.numel() for p in policy.parameters()),
        "tokens": policy.num_tokens(),
        "batch_size": dm.batch_size,
    }
    peak = matmul_peak()
    plain = torch_loop(cfg, policy, dm, b.steps, b.warmup)
    light = lightning_loop(cfg, policy, dm, b.steps, b.warmup)
    train_flops = 3 * policy.flops_per_sample()
    results |= dict(
        lightning_vs_torch=light["samples_per_s"] / plain["samples_per_s"],
        samples_per_s_lightning=light["samples_per_s"],
        samples_per_s_torch=plain["samples_per_s"],
        mfu=train_flops * light["samples_per_s"] / peak,
        matmul_peak_gflops=peak / 1e9,
        train_gflop_per_sample=train_flops / 1e9,
        data_wait_fraction=light["data_wait_fraction"],
        data_wait_fraction_torch=plain["data_wait_fraction"],
    )
    results |= attention_speed(policy, dm.batch_size)
    results |= rollout_speed(policy, env_kwargs, b.rollout_episodes, b.num_envs)
    results |= latency(policy, env_kwargs, b.latency_samples)
    results |= collect_speed(env_kwargs, out_dir, b.collect_episodes)
    results["scaling"] = scaling(cfg, list(b.scaling_sizes), b.scaling_steps, b.warmup)
    (out_dir / "benchmark.json").write_text(json.dumps(results, indent=2))
    print(format_results(results))
    print(f"written to {out_dir / 'benchmark.json'}")
    return results


def format_results(r: dict) -> str:
    goals = {
        "lightning_vs_torch": ">= 0.9",
        "mfu": ">= 0.5",
        "data_wait_fraction": "<= 0.05",
        "rollout_speedup": ">= 5",
        "latency_ms_p50": "<= 5",
        "sdpa_vs_naive": "",
        "latency_ms_p99": "",
        "collect_steps_per_s": "",
    }
    lines = [f"{'metric':<24} {'value':>12}  goal"]
    lines += [f"{k:<24} {r[k]:>12.3f}  {g}" for k, g in goals.items()]
    lines += [
        f"{'samples/s lightning':<24} {r['samples_per_s_lightning']:>12.1f}",
        f"{'samples/s torch':<24} {r['samples_per_s_torch']:>12.1f}",
        f"{'matmul peak GFLOP/s':<24} {r['matmul_peak_gflops']:>12.1f}",
        "",
        f"{'image':>6} {'tokens':>7} {'us/sample':>10} {'GFLOP/sample':>13} "
        f"{'attn-score share':>17}",
    ]
    lines += [
        f"{s['image_size']:>6} {s['tokens']:>7} {s['us_per_sample']:>10.0f} "
        f"{s['gflop_per_sample']:>13.3f} {s['attention_score_share']:>17.1%}"
        for s in r["scaling"]
    ]
    return "\n".join(lines)


def _forever(iterable):
    while True:
        yield from iterable
