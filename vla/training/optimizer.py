"""The optimizer and schedule every recipe trains with (`BCModule`, `VLMModule`): weight decay
on matrices only, and AdamW's fused kernel wherever nothing rules it out.

The fused kernel updates every tensor in one pass instead of a dozen small ops per tensor,
which makes a whole training step a few percent faster on a CPU (docs/performance.md).
Automatic mixed precision with gradient clipping rules it out: Lightning will not clip for
an optimizer that unscales inside its step."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import lightning as L
from torch import nn


def param_groups(module: nn.Module) -> list[dict]:
    """Weight decay on matrices only: none on biases, norms and other vectors (ndim < 2).
    The names label the groups' learning rates in TensorBoard (lr-AdamW/decay, .../no_decay)."""
    decay = [p for p in module.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in module.parameters() if p.requires_grad and p.ndim < 2]
    return [
        {"params": decay, "name": "decay"},
        {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"},
    ]


def build_optimizer(factory: Callable, groups: list[dict], precision: str = "32-true"):
    """factory(groups) (a Hydra partial), fused where the optimizer has a fused kernel, the
    config chose no implementation itself (`fused`, `foreach`) and `precision` (Lightning's
    trainer.precision) is not automatic mixed precision."""
    func, chosen = getattr(factory, "func", factory), getattr(factory, "keywords", {})
    can_fuse = "fused" in inspect.signature(func).parameters
    if can_fuse and not {"fused", "foreach"} & set(chosen) and "mixed" not in str(precision):
        return factory(groups, fused=True)
    return factory(groups)


def configure_optimizers(module: L.LightningModule):
    """What a recipe's `configure_optimizers` returns: the optimizer over `param_groups`, and
    the schedule (if any) stepped every optimisation step over the run's length."""
    precision = module.trainer.precision
    optimizer = build_optimizer(module.optimizer_factory, param_groups(module), precision)
    if module.scheduler_factory is None:
        return optimizer
    total = module.trainer.estimated_stepping_batches
    scheduler = module.scheduler_factory(optimizer, total_steps=total)
    return {
        "optimizer": optimizer,
        "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
    }
