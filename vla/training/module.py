"""The behavior-cloning recipe as a LightningModule. The network itself is a plain nn.Module
(`vla.models.policy.VLAPolicy`); this class owns only how it is trained."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch

from vla.checkpoint import vla_payload
from vla.errors import ConfigError
from vla.keys import ACTION
from vla.models.policy import VLAPolicy


class BCModule(L.LightningModule):
    """Behavior cloning: minimise the policy's action loss on expert demonstrations.

    Args:
        policy: the network.
        optimizer: a partial optimizer (Hydra `_partial_: true`) taking the parameters.
        scheduler: a partial scheduler taking (optimizer, total_steps), stepped every step.
        policy_config: the resolved config that rebuilds `policy`; saved in every checkpoint so
            evaluation needs nothing but the checkpoint.
        env_config: the env the policy was trained on; saved likewise.
        nonfinite: what a NaN/inf loss does: "raise" stops training with a message naming the
            step; "skip" skips that batch's update and counts it in `train/skipped_batches`.
    """

    def __init__(
        self,
        policy: VLAPolicy,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
        policy_config: dict | None = None,
        env_config: dict | None = None,
        nonfinite: str = "raise",
    ):
        super().__init__()
        if nonfinite not in ("raise", "skip"):
            raise ConfigError(f"nonfinite={nonfinite!r} must be 'raise' or 'skip'")
        self.nonfinite = nonfinite
        self.skipped_batches = 0
        self.policy = policy
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.policy_config = policy_config
        self.env_config = env_config

    def model_step(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        return self.policy(batch)

    def training_step(self, batch, batch_idx):
        loss, logs = self.model_step(batch)
        if not torch.isfinite(loss):
            if self.nonfinite == "raise":
                raise FloatingPointError(
                    f"non-finite training loss {loss.item()} at step {self.global_step} "
                    "(lower optimizer.lr, check the data, or set nonfinite=skip)"
                )
            self.skipped_batches += 1
            self.log("train/skipped_batches", float(self.skipped_batches))
            return None  # Lightning skips the optimizer step for this batch
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch[ACTION]))
        for k, v in logs.items():
            if k != "loss":
                self.log(f"train/{k}", v, batch_size=len(batch[ACTION]))
        return loss

    def validation_step(self, batch, batch_idx):
        loss, logs = self.model_step(batch)
        n = len(batch[ACTION])
        self.log("val/loss", loss, prog_bar=True, batch_size=n, sync_dist=True)
        for k, v in logs.items():
            if k != "loss":
                self.log(f"val/{k}", v, batch_size=n, sync_dist=True)

    def param_groups(self) -> list[dict]:
        """Weight decay on matrices only: none on biases, norms and other vectors (ndim < 2).
        The names label the groups' learning rates in TensorBoard (lr-AdamW/decay, .../no_decay)."""
        decay = [p for p in self.parameters() if p.requires_grad and p.ndim >= 2]
        no_decay = [p for p in self.parameters() if p.requires_grad and p.ndim < 2]
        return [
            {"params": decay, "name": "decay"},
            {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"},
        ]

    def configure_optimizers(self):
        optimizer = self.optimizer_factory(self.param_groups())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(
            optimizer, total_steps=self.trainer.estimated_stepping_batches
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["vla"] = vla_payload(self.policy_config, self.env_config)
