"""The VLM's training recipe as a LightningModule (`bc=vlm`): next-token cross-entropy on the
suffix, answers and action tokens alike; at validation the answers decoded greedily and scored
per family (`val/acc/<family>`), the action chunks decoded and compared (`val/action_mse`).

It trains through `vla.training.train.train` like `BCModule`: the same optimizer groups and
schedule, checkpoints (with the `vla` payload), resume, SIGTERM, rollouts in stage 2.
`model.init_from=<stage-1 run or .ckpt>` is loaded when fitting starts, before the data's
statistics (a resumed run then loads its own checkpoint over both)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import lightning as L
import torch
from torch import Tensor

from vla.checkpoint import load_state, read_checkpoint, vla_payload
from vla.errors import ConfigError
from vla.models.language import PAD_ID
from vla.training.optimizer import configure_optimizers
from vla.vlm.data import (
    ACTION_FAMILY,
    ANCHOR,
    ANCHORED,
    CENTRE,
    FAMILY,
    HAS_STATE,
    IMAGE,
    STATE,
    TARGETED,
    TARGETS,
    TOKENS,
)
from vla.vlm.model import VLMPolicy
from vla.vlm.scoring import action_mse, per_family, score_answers

FRESH = ("normalizer.", "action_bins.")  # set from this run's data, never from init_from


def keypoint_mse(xy: Tensor, centre: Tensor, has: Tensor) -> Tensor:
    """Squared distance of keypoints xy [B,2] (image [-1,1]) from shape centres [B,2] (arena
    [0,1]), averaged over the examples that have a shape (`has` [B])."""
    err = (xy - (2 * centre - 1)).square().sum(-1)  # [B]
    return (err * has.float()).sum() / has.float().sum().clamp(min=1)


def load_init(policy: VLMPolicy, path) -> str:
    """Copies a stage-1 checkpoint's weights (all but FRESH) into `policy`."""
    path = Path(path)
    path = path / "checkpoints" / "last.ckpt" if path.is_dir() else path
    if not path.is_file():
        raise ConfigError(f"model.init_from={path}: no such checkpoint (a run folder or .ckpt)")
    state = {
        k.removeprefix("policy."): v
        for k, v in read_checkpoint(path)["state_dict"].items()
        if k.startswith("policy.") and not k.removeprefix("policy.").startswith(FRESH)
    }
    state |= {k: v for k, v in policy.state_dict().items() if k.startswith(FRESH)}
    load_state(policy, state, f"model.init_from={path}: weights do not fit this VLMPolicy")
    return str(path)


class VLMModule(L.LightningModule):
    """Args: policy; optimizer and scheduler partials (as `BCModule`'s); the configs a
    checkpoint stores to rebuild the policy and its env (None: no env, stage 1);
    keypoint_weight: a training-only loss pulling keypoint 0 onto the shape the question or
    instruction is about (`FiLMConvVision`; 0: off), as `bc.target_keypoint_weight` does for
    the default policy; anchor_weight: one pulling keypoint 1 onto the shape a relation or
    spatial question is measured from (the relative eyes; 0: off)."""

    uses_target = uses_objects = False  # what train() asks every recipe: nothing extra

    def __init__(
        self, policy: VLMPolicy, optimizer: Callable, scheduler: Callable | None = None,
        policy_config: dict | None = None, env_config: dict | None = None,
        keypoint_weight: float = 0.0, anchor_weight: float = 0.0,
    ):  # fmt: skip
        super().__init__()
        weights = dict(keypoint_weight=keypoint_weight, anchor_weight=anchor_weight)
        for name, weight in weights.items():
            if weight < 0:
                raise ConfigError(f"bc.{name}={weight} must be >= 0")
        if anchor_weight > 0 and not policy.vision.relative:
            raise ConfigError(
                f"bc.anchor_weight={anchor_weight} pulls keypoint 1 onto the shape a relation is "
                "measured from, which only the relative eyes read: set "
                "model.vision.relative=true or bc.anchor_weight=0"
            )
        self.policy = policy
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.policy_config, self.env_config = policy_config, env_config
        self.keypoint_weight, self.anchor_weight = keypoint_weight, anchor_weight
        self._hits: dict[str, list[bool]] = defaultdict(list)
        self._mse: list[float] = []

    def setup(self, stage: str) -> None:
        """Stage 2's start (`model.init_from`), then the demonstrations' statistics."""
        if stage != "fit":
            return
        if self.policy.init_from is not None and self.trainer.ckpt_path is None:  # not resuming
            load_init(self.policy, self.policy.init_from)
        stats = self.trainer.datamodule.statistics() if self.trainer.datamodule else None
        if stats is not None:
            self.policy.set_normalization(**stats)

    def model_step(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """Mean token cross-entropy (+ the keypoint loss), and its parts for the logs."""
        p = self.policy
        logits, outputs = p.suffix_logits(
            batch[IMAGE], batch[STATE], batch[TOKENS], batch[HAS_STATE], batch["suffix"]
        )  # [B,S,V]
        targets = batch[TARGETS]  # [B,S]
        ce = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), targets, ignore_index=PAD_ID, reduction="none"
        )  # [B,S]
        real = targets != PAD_ID
        loss = ce.sum() / real.sum().clamp(min=1)
        logs = {}
        is_action = (batch[FAMILY] == ACTION_FAMILY)[:, None] & real
        for name, sel in (("loss_answers", real & ~is_action), ("loss_actions", is_action)):
            if sel.any():
                logs[name] = ce[sel].mean().detach()
        pulls = (
            ("keypoint_mse", self.keypoint_weight, 0, CENTRE, TARGETED),
            ("anchor_mse", self.anchor_weight, 1, ANCHOR, ANCHORED),
        )
        for name, weight, k, centre, has in pulls:
            if weight > 0 and "keypoints_xy" in outputs:
                mse = keypoint_mse(outputs["keypoints_xy"][:, k], batch[centre], batch[has])
                loss = loss + weight * mse
                logs[name] = mse.detach()
        return loss, logs

    def _logged_step(self, batch, split: str):
        """model_step, its loss and logs under `split/`."""
        loss, logs = self.model_step(batch)
        n = len(batch[FAMILY])
        self.log(f"{split}/loss", loss, prog_bar=True, batch_size=n)
        for k, v in logs.items():
            self.log(f"{split}/{k}", v, batch_size=n)
        return loss

    def training_step(self, batch, batch_idx):
        return self._logged_step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._logged_step(batch, "val")
        for f, hit in zip(*score_answers(self.policy, batch), strict=True):
            self._hits[f].append(hit)
        mse = action_mse(self.policy, batch)
        if mse is not None:
            self._mse.append(float(mse))

    def on_validation_epoch_end(self) -> None:
        if self._hits:
            families = [f for f, hits in self._hits.items() for _ in hits]
            hits = [h for f in self._hits for h in self._hits[f]]
            for f, v in per_family(families, hits).items():
                self.log(f"val/acc/{f}", v["accuracy"])
        if self._mse:
            self.log("val/action_mse", sum(self._mse) / len(self._mse))
        self._hits, self._mse = defaultdict(list), []
        if not self.trainer.sanity_checking:
            self.log("step", float(self.global_step))

    def configure_optimizers(self):
        return configure_optimizers(self)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["vla"] = vla_payload(self.policy_config, self.env_config)
