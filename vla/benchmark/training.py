"""Timed training loops: the Lightning recipe and a plain PyTorch loop doing the same step
(same module, parameter groups, optimizer, schedule and gradient clipping)."""

from __future__ import annotations

import time

import lightning as L
import torch
from omegaconf import DictConfig

from vla.training.module import BCModule, build_module
from vla.training.optimizer import build_optimizer, param_groups


def make_module(cfg: DictConfig, policy) -> BCModule:
    """The training recipe as `train` builds it: optimizer, schedule and losses."""
    return build_module(cfg, policy)


def torch_loop(cfg: DictConfig, policy, dm, steps: int, warmup: int) -> dict:
    """The reference: a plain PyTorch loop doing what the Lightning recipe does per step.

    Returns samples/s and the fraction of the time spent fetching batches, over the `steps`
    steps after `warmup`.
    """
    module = make_module(cfg, policy)
    groups = param_groups(module)  # the optimizer as Lightning's: weight decay, fused kernel
    optimizer = build_optimizer(module.optimizer_factory, groups, cfg.trainer.precision)
    scheduler = module.scheduler_factory(optimizer, total_steps=steps + warmup)
    policy.train()
    dm.trainer = None  # batches for one process, not for the last Lightning run's ranks
    batches = iter(_forever(dm.train_dataloader()))
    wait = 0.0
    for i in range(steps + warmup):
        if i == warmup:
            start, wait = time.perf_counter(), 0.0
        t = time.perf_counter()
        batch = next(batches)
        wait += time.perf_counter() - t
        loss, _, _ = module.model_step(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.trainer.gradient_clip_val)
        optimizer.step()
        scheduler.step()
    seconds = time.perf_counter() - start
    return dict(
        samples_per_s=steps * dm.batch_size / seconds,
        data_wait_fraction=wait / seconds,
        timed_steps=steps,
    )


class StepTimer(L.Callback):
    """Times the optimizer steps from `warmup` on, and the gaps between them (data + loop)."""

    def __init__(self, warmup: int):
        self.warmup, self.start, self.end, self.gap, self.last_end = warmup, None, None, 0.0, None
        self.timed_steps = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.perf_counter()
        if trainer.global_step == self.warmup:  # the global step: batch_idx restarts each epoch
            self.start = now
        elif self.start is not None and self.last_end is not None:
            self.gap += now - self.last_end

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.last_end = self.end = time.perf_counter()
        self.timed_steps += self.start is not None


def lightning_loop(cfg: DictConfig, policy, dm, steps: int, warmup: int) -> dict:
    """The real Lightning recipe (same module, optimizer, schedule, clipping), timed over the
    same `steps` steps after `warmup` as `torch_loop`."""
    timer = StepTimer(warmup)
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
    seconds = timer.end - timer.start  # from the start of step `warmup` to the end of the last
    return dict(
        samples_per_s=timer.timed_steps * dm.batch_size / seconds,
        data_wait_fraction=timer.gap / seconds,
        timed_steps=timer.timed_steps,
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


def _forever(iterable):
    while True:
        yield from iterable
