"""The behavior-cloning recipe as a LightningModule. The network itself is a plain nn.Module
(`vla.models.policy.VLAPolicy`); this class owns only how it is trained, including the one
loss that uses privileged information (where the named target is), so that "training only"
holds by construction: a rollout runs the policy, never this module."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch
from omegaconf import OmegaConf
from torch import nn

from vla.checkpoint import vla_payload
from vla.config import instantiate
from vla.envs.grammar import COLOURS, PAIRS, SHAPES
from vla.errors import ConfigError
from vla.keys import (
    ACTION,
    HAS_REFERENCE,
    IMAGE,
    OBJECT_PAIRS,
    OBJECTS,
    REACHED,
    REACHED_XY,
    REFERENCE,
    STATE,
    TARGET,
    TOKENS,
)
from vla.models.heads.base import flatten_readouts, mean_over_real_steps
from vla.models.policy import Encoding, VLAPolicy, action_chunk
from vla.training.objects import object_losses


def image_distance2(guess: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Squared distance of guesses [...,2] (image coordinates in [-1,1]) from targets [...,2]
    (arena units in [0,1]^2, which map onto the image as 2 * target - 1) -> [...]."""
    return (guess - (2 * target - 1)).square().sum(-1)


def masked_distance2(guess: torch.Tensor, target: torch.Tensor, mask: torch.Tensor):
    """Mean of `image_distance2` over the entries where mask [...] is true (0 if none)."""
    mask = mask.to(guess.dtype)
    return (image_distance2(guess, target) * mask).sum() / mask.sum().clamp(min=1.0)


def target_position_loss(guess: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared distance of a guess [B,2] (image coordinates) from the target [B,2]
    (arena units)."""
    return image_distance2(guess, target).mean()


def target_keypoint_loss(keypoints_xy: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Squared distance of keypoint 0 [B,K,2] (image coordinates in [-1,1]) from the named
    target [B,2] (arena units in [0,1]^2, which map onto the image as x -> columns,
    y -> rows, so the conversion is 2 * target - 1)."""
    return target_position_loss(keypoints_xy[:, 0], target)


def referent_done_loss(
    logits: torch.Tensor, count: torch.Tensor, reached: torch.Tensor
) -> torch.Tensor:
    """Binary cross-entropy of the selector's done logits [B,R] against what the step's
    episode had reached: referent r is done once more than r shapes were (reached [B]);
    referents past an instruction's last (it has count [B]) count for nothing."""
    r = torch.arange(logits.shape[1], device=logits.device)  # [R]
    done = (r[None] < reached[:, None]).to(logits.dtype)  # [B,R]
    valid = (r[None] < count[:, None]).to(logits.dtype)  # [B,R]
    bce = nn.functional.binary_cross_entropy_with_logits(logits, done, reduction="none")
    return (bce * valid).sum() / valid.sum()


def referent_keypoint_loss(
    xy: torch.Tensor,
    reached_xy: torch.Tensor,
    reached: torch.Tensor,
    target: torch.Tensor | None = None,
) -> torch.Tensor:
    """Squared distance of each referent's keypoint xy [B,R,2] (image coordinates) from its
    shape, for the referents r < reached [B], whose shapes are reached_xy [B,C,2] (arena
    units): the map of a referent already done lands on its dimmed shape, not on whatever
    else looks like it. With target [B,2], the referent r = reached (the one to reach now)
    is pulled onto it too. Zero when no referent of the batch is asked for."""
    B, R = xy.shape[:2]
    n = min(R, reached_xy.shape[1])
    goal = xy.new_zeros(B, R, 2)
    goal[:, :n] = reached_xy[:, :n]  # [B,R,2]: rows r >= n are never reached ones
    r = torch.arange(R, device=xy.device)
    asked = r[None] < reached[:, None]  # [B,R]
    if target is not None:
        now = r[None] == reached[:, None]  # [B,R]
        goal = torch.where(now[..., None], target[:, None], goal)
        asked = asked | now
    return masked_distance2(xy, goal, asked)


def reference_keypoint_loss(xy: torch.Tensor, reference: torch.Tensor, has: torch.Tensor):
    """Squared distance of the reference's keypoint xy [B,2] (image coordinates) from the
    shape a relation names, reference [B,2] (arena units), over the steps that have one
    (has [B]). Zero when none of the batch does."""
    return masked_distance2(xy, reference, has)


# (colour, kind) index of each colour+shape pair, the labels of the attribute probes: [P,2]
PAIR_ATTRIBUTES = torch.tensor([(list(COLOURS).index(c), SHAPES.index(s)) for c, s in PAIRS])


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
        referent_done_weight: weight of the cross-entropy of the referent selector's "done"
            against the stage of the chain the demonstration was at (0: off; needs
            model/referents).
        referent_keypoint_weight: weight of a loss pulling each referent's keypoint (the
            selector's `keypoint`) onto its shape once that shape was reached, and, with the
            selector's own detector, the referent to reach now onto its shape (0: off; needs
            model/referents).
        reference_keypoint_weight: weight of a loss pulling the relational keypoint's
            reference onto the shape a relation instruction names ("the red circle" of "the
            shape nearest the red circle"; 0: off; needs model/relations).
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
        referent_done_weight: float = 0.0,
        referent_keypoint_weight: float = 0.0,
        reference_keypoint_weight: float = 0.0,
    ):
        super().__init__()
        if nonfinite not in ("raise", "skip"):
            raise ConfigError(f"bc.nonfinite={nonfinite!r} must be 'raise' or 'skip'")
        if target_keypoint_weight < 0:
            raise ConfigError(f"bc.target_keypoint_weight={target_keypoint_weight} must be >= 0")
        if target_keypoint_weight > 0 and policy.keypoints is None:
            raise ConfigError(
                f"bc.target_keypoint_weight={target_keypoint_weight} pulls keypoint 0 onto the "
                "target, but model/keypoints=none gives the policy no keypoints: choose "
                "model/keypoints=spatial_softmax or set bc.target_keypoint_weight=0"
            )
        if target_position_weight < 0:
            raise ConfigError(f"bc.target_position_weight={target_position_weight} must be >= 0")
        for name, weight, needs, part in [
            ("object_slot_weight", object_slot_weight, "model/objects", policy.objects),
            ("pointer_weight", pointer_weight, "model/pointer", policy.pointer),
            ("object_attribute_weight", object_attribute_weight, "model/objects", policy.objects),
            ("referent_done_weight", referent_done_weight, "model/referents", policy.referents),
            (
                "referent_keypoint_weight",
                referent_keypoint_weight,
                "model/referents",
                policy.referents,
            ),
            (
                "reference_keypoint_weight",
                reference_keypoint_weight,
                "model/relations",
                policy.relations,
            ),
        ]:
            if weight < 0:
                raise ConfigError(f"bc.{name}={weight} must be >= 0")
            if weight > 0 and part is None:
                raise ConfigError(f"bc.{name}={weight} needs {needs}, which this model lacks")
        self.object_slot_weight, self.pointer_weight = object_slot_weight, pointer_weight
        self.object_attribute_weight = object_attribute_weight
        self.referent_done_weight = referent_done_weight
        self.referent_keypoint_weight = referent_keypoint_weight
        self.reference_keypoint_weight = reference_keypoint_weight
        if object_attribute_weight > 0:  # object tokens [B,K,D] -> colour, kind logits
            self.colour_probe = nn.Linear(policy.d_model, len(COLOURS))
            self.shape_probe = nn.Linear(policy.d_model, len(SHAPES))
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
    def uses_target(self) -> bool:
        """Whether batches must carry TARGET, REACHED, REACHED_XY, REFERENCE and HAS_REFERENCE
        (the shape to reach now, the shapes reached before, a relation's reference)."""
        weights = self.target_keypoint_weight, self.target_position_weight
        referents = self.referent_done_weight, self.referent_keypoint_weight
        return self.uses_objects or max(*weights, *referents, self.reference_keypoint_weight) > 0

    @property
    def uses_objects(self) -> bool:
        """Whether batches must carry OBJECTS and OBJECT_PAIRS (every shape's centre and pair)."""
        return max(self.object_slot_weight, self.pointer_weight, self.object_attribute_weight) > 0

    def setup(self, stage: str) -> None:
        """The policy's units come from the training split (set after the data is prepared,
        on every process; a resumed run then loads the checkpoint's own)."""
        if stage == "fit" and self.trainer.datamodule is not None:
            self.policy.set_normalization(**self.trainer.datamodule.statistics())

    def model_step(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict, Encoding]:
        """The training loss: the policy's action loss (+ the weighted target-keypoint loss).

        Returns:
            scalar loss, detached scalar logs, and the batch's encoding.
        """
        encoding = self.policy.encode(batch[IMAGE], batch[STATE], batch[TOKENS])
        loss, logs = self.policy.action_loss(encoding.features, batch)
        if self.target_keypoint_weight > 0:
            aux = target_keypoint_loss(encoding.keypoints_xy, batch[TARGET])
            loss = loss + self.target_keypoint_weight * aux
            logs = logs | {"target_keypoint_mse": aux.detach()}
        if self.target_position_weight > 0:
            guess = self.target_probe(flatten_readouts(encoding.features))  # [B,R,D] -> [B,2]
            aux = target_position_loss(guess, batch[TARGET])
            loss = loss + self.target_position_weight * aux
            logs = logs | {"target_position_mse": aux.detach()}
        if self.referent_done_weight > 0:
            count = self.policy.referents.count(batch[TOKENS])  # [B]
            aux = referent_done_loss(encoding.done_logits, count, batch[REACHED])
            loss = loss + self.referent_done_weight * aux
            logs = logs | {"referent_done_ce": aux.detach()}
        if self.referent_keypoint_weight > 0:
            own = self.policy.referents.detector is not None  # no target loss teaches it
            aux = referent_keypoint_loss(
                encoding.referents_xy,
                batch[REACHED_XY],
                batch[REACHED],
                batch[TARGET] if own else None,
            )
            loss = loss + self.referent_keypoint_weight * aux
            logs = logs | {"referent_keypoint_mse": aux.detach()}
        if self.reference_keypoint_weight > 0:
            aux = reference_keypoint_loss(
                encoding.reference_xy, batch[REFERENCE], batch[HAS_REFERENCE]
            )
            loss = loss + self.reference_keypoint_weight * aux
            logs = logs | {"reference_keypoint_mse": aux.detach()}
        if self.uses_objects:
            pointer = encoding.pointer_logits if self.pointer_weight > 0 else None
            attributes = None
            if self.object_attribute_weight > 0:
                tokens = encoding.object_tokens  # [B,K,D]
                labels = PAIR_ATTRIBUTES.to(tokens.device)[batch[OBJECT_PAIRS]]  # [B,M,2]
                attributes = (self.colour_probe(tokens), self.shape_probe(tokens), labels)
            aux = object_losses(
                encoding.objects_xy, pointer, batch[OBJECTS], batch[TARGET], attributes
            )
            loss = loss + self.object_slot_weight * aux["slot_mse"]
            if pointer is not None:
                loss = loss + self.pointer_weight * aux["pointer_ce"]
            if attributes is not None:
                loss = loss + self.object_attribute_weight * aux["attribute_ce"]
            logs = logs | {k: v.detach() for k, v in aux.items()}
        return loss, logs, encoding

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
