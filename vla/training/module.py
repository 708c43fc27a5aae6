"""The behavior-cloning recipe as a LightningModule. The network itself is a plain nn.Module
(`vla.models.policy.VLAPolicy`); this class owns only how it is trained, including the one
loss that uses privileged information (where the named target is), so that "training only"
holds by construction: a rollout runs the policy, never this module."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from vla.checkpoint import vla_payload
from vla.config import instantiate
from vla.errors import ConfigError
from vla.keys import ACTION, IMAGE, STATE, TARGET, TOKENS
from vla.models.heads.base import action_chunk, flatten_readouts, mean_over_real_steps
from vla.models.policy import Encoding, VLAPolicy
from vla.training.objects import ObjectLosses
from vla.training.optimizer import configure_optimizers


def image_mse(guess: Tensor, batch: dict[str, Tensor]) -> Tensor:
    """Mean squared distance of guesses [B,2] (image coordinates in [-1,1]) from the batch's
    TARGET [B,2] (arena units in [0,1]^2, which map onto the image as x -> columns, y -> rows:
    2 * target - 1)."""
    return (guess - (2 * batch[TARGET] - 1)).square().sum(-1).mean()


def build_module(cfg, policy: VLAPolicy, env_config: dict | None = None) -> BCModule:
    """The recipe `cfg.bc` describes, training `policy`; its checkpoints carry `cfg.model`
    resolved and `env_config`. Hydra builds the optimizer and scheduler partials; the policy
    and the configs are handed over as they are (a config with a `_target_` given to Hydra
    would be built, not stored)."""
    recipe = instantiate(cfg.bc, _partial_=True)
    return recipe(policy, policy_config=policy_config(cfg), env_config=env_config)


def policy_config(cfg) -> dict:
    """The resolved `model` node of a run's config: what a checkpoint stores to rebuild the
    policy."""
    return OmegaConf.to_container(cfg.model, resolve=True)


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
        target_keypoint_weight: weight of an auxiliary loss that pulls keypoint 0 onto the
            named target (0: off). It needs keypoint tokens, and batches that carry TARGET
            (`uses_target`): privileged supervision, so it lives here and not in the policy.
        target_position_weight: weight of an auxiliary loss on a linear probe of the readout
            features that must say where the shape to reach now is (0: off). The probe is
            this module's, not the policy's: it shapes what the readout carries, and no
            rollout ever sees it.
        object_slot_weight: weight of an auxiliary loss matching the object slots to every
            shape's centre, one slot per shape (0: off; needs model/objects).
        pointer_weight: weight of the pointer's cross-entropy against the slot matched to the
            shape to reach now (0: off; needs a pointer).
        object_attribute_weight: weight of linear probes that must tell each shape's colour
            and kind from the token of the slot matched to it (0: off; needs model/objects):
            what a word can name, kept apart in what a slot carries.
    """

    def __init__(
        self,
        policy: VLAPolicy,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
        policy_config: dict | None = None,
        env_config: dict | None = None,
        nonfinite: str = "raise",
        target_keypoint_weight: float = 0.0,
        target_position_weight: float = 0.0,
        object_slot_weight: float = 0.0,
        pointer_weight: float = 0.0,
        object_attribute_weight: float = 0.0,
    ):
        super().__init__()
        if nonfinite not in ("raise", "skip"):
            raise ConfigError(f"bc.nonfinite={nonfinite!r} must be 'raise' or 'skip'")
        weights = dict(
            target_keypoint_weight=target_keypoint_weight,
            target_position_weight=target_position_weight,
            object_slot_weight=object_slot_weight,
            pointer_weight=pointer_weight,
            object_attribute_weight=object_attribute_weight,
        )
        for name, weight in weights.items():
            if weight < 0:
                raise ConfigError(f"bc.{name}={weight} must be >= 0")
        sources = policy.sources
        if target_keypoint_weight > 0 and "keypoints" not in sources:
            raise ConfigError(
                f"bc.target_keypoint_weight={target_keypoint_weight} pulls keypoint 0 onto the "
                "target, but model/keypoints=none gives the policy no keypoints: choose "
                "model/keypoints=spatial_softmax or set bc.target_keypoint_weight=0"
            )
        objects = object_slot_weight, pointer_weight, object_attribute_weight
        if max(objects) > 0 and "objects" not in sources:
            raise ConfigError(
                f"bc.object_*_weight / bc.pointer_weight {objects} need model/objects"
            )
        if pointer_weight > 0 and not sources["objects"].pointer:
            raise ConfigError(
                f"bc.pointer_weight={pointer_weight} needs model.objects.pointer=true"
            )
        self.object_losses = ObjectLosses(policy.d_model, *objects) if max(objects) > 0 else None
        self.target_keypoint_weight = target_keypoint_weight
        self.target_position_weight = target_position_weight
        if target_position_weight > 0:  # readout features [B,R*D] -> where to go [B,2]
            self.target_probe = nn.Linear(policy.readout.num_readouts * policy.d_model, 2)
        self.nonfinite = nonfinite
        self.skipped_batches = 0
        self.policy = policy
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.policy_config = policy_config
        self.env_config = env_config

    @property
    def uses_objects(self) -> bool:
        """Whether batches must carry OBJECTS and OBJECT_PAIRS (every shape's centre and pair)."""
        return self.object_losses is not None

    @property
    def uses_target(self) -> bool:
        """Whether batches must carry TARGET (where the shape to reach now is)."""
        targets = self.target_keypoint_weight, self.target_position_weight
        return self.uses_objects or max(targets) > 0

    def setup(self, stage: str) -> None:
        """The policy's units come from the training split (set after the data is prepared,
        on every process; a resumed run then loads the checkpoint's own)."""
        if stage == "fit" and self.trainer.datamodule is not None:
            self.policy.set_normalization(**self.trainer.datamodule.statistics())

    def model_step(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict, Encoding]:
        """The training loss: the policy's action loss plus the weighted training-only losses.

        Returns:
            scalar loss, detached scalar logs, and the batch's encoding.
        """
        encoding = self.policy.encode(batch[IMAGE], batch[STATE], batch[TOKENS])
        loss, logs = self.policy.action_loss(encoding.features, batch)
        for name, (weight, value) in self.auxiliary_losses(encoding, batch).items():
            loss = loss + weight * value if weight > 0 else loss
            logs = logs | {name: value.detach()}
        return loss, logs, encoding

    def auxiliary_losses(self, encoding: Encoding, batch: dict) -> dict[str, tuple[float, Tensor]]:
        """The training-only losses, {log name: (weight, value)}: they read the privileged
        TARGET (and OBJECTS) of the batch and what the policy's token sources output."""
        terms = {}
        if self.target_keypoint_weight > 0:  # keypoint 0 [B,2] onto the named target [B,2]
            xy = encoding.outputs["keypoints_xy"][:, 0]
            terms["target_keypoint_mse"] = (self.target_keypoint_weight, image_mse(xy, batch))
        if self.target_position_weight > 0:  # a probe of the readout: where is the target?
            guess = self.target_probe(flatten_readouts(encoding.features))  # [B,R,D] -> [B,2]
            terms["target_position_mse"] = (self.target_position_weight, image_mse(guess, batch))
        if self.object_losses is not None:
            terms |= self.object_losses(encoding.outputs, batch)
        return terms

    def training_step(self, batch, batch_idx):
        loss, logs, _ = self.model_step(batch)
        if not torch.isfinite(loss):
            if self.nonfinite == "raise":
                raise FloatingPointError(
                    f"non-finite training loss {loss.item()} at step {self.global_step} "
                    "(lower optimizer.lr, check the data, or set bc.nonfinite=skip)"
                )
            self.skipped_batches += 1
            self.log("train/skipped_batches", float(self.skipped_batches))
            return None  # Lightning skips the optimizer step for this batch
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch[ACTION]))
        for k, v in logs.items():
            self.log(f"train/{k}", v, batch_size=len(batch[ACTION]))
        return loss

    def validation_step(self, batch, batch_idx):
        """The training loss, and `action_mse`: the chunk a query predicts (greedy decoding,
        flow sampling) against the target's real steps, in env units. Only here: a training
        step never samples or decodes."""
        loss, logs, encoding = self.model_step(batch)
        logs["action_mse"] = self.action_mse(encoding.features, batch)
        n = len(batch[ACTION])
        self.log("val/loss", loss, prog_bar=True, batch_size=n, sync_dist=True)
        for k, v in logs.items():
            self.log(f"val/{k}", v, batch_size=n, sync_dist=True)

    def on_validation_epoch_end(self) -> None:
        # Loggers plot what validation logs (val/*, eval/*) at Lightning's count of the steps
        # before this one (249 after 250 steps); the `step` key puts it at the step the
        # console and the rollout pictures name
        if not self.trainer.sanity_checking:
            self.log("step", float(self.global_step))

    def action_mse(self, features: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Squared error of the chunks a query predicts from readout features [B,R,D] against
        the batch's actions, in env units, over the real steps."""
        chunk, is_pad = action_chunk(batch)  # [B,K,A], [B,K] | None
        error = (self.policy.predict_chunk(features) - chunk).square()  # [B,K,A]
        return mean_over_real_steps(error, is_pad)

    def configure_optimizers(self):
        return configure_optimizers(self)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["vla"] = vla_payload(self.policy_config, self.env_config)
