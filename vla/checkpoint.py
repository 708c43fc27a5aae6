"""Loading checkpoints safely: a checkpoint is data, never code.

Checkpoints are read with `torch.load(weights_only=True)`, which refuses to unpickle anything
but tensors and plain containers, and the policy config they carry may only name classes and
functions inside the `vla` package.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch

from vla.config import instantiate
from vla.models.policy import VLAPolicy

SAFE_PREFIX = "vla."


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable, unsafe or does not fit the model."""


def read_checkpoint(path) -> dict:
    """The checkpoint dict, loaded as data only. Raises CheckpointError naming the problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"ckpt_path={str(path)!r} does not exist")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is not a readable checkpoint (truncated or not a "
            "checkpoint?): not a torch.save archive"
        )
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [line.strip() for line in str(e).splitlines() if "Unsupported" in line]
        raise CheckpointError(
            f"ckpt_path={str(path)!r} was refused by the safe loader (weights_only): "
            f"{lines[0] if lines else 'it holds more than tensors and plain data'}"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is not a readable checkpoint (truncated or not a "
            f"checkpoint?): {first}"
        ) from None
    if not isinstance(ckpt, dict) or "vla" not in ckpt or "state_dict" not in ckpt:
        raise CheckpointError(f"ckpt_path={str(path)!r} is not a vla training checkpoint")
    return ckpt


def check_targets(config, where: str = "policy_config") -> None:
    """Refuses any `_target_` outside the vla package anywhere in a config tree."""
    if isinstance(config, dict):
        target = config.get("_target_")
        if target is not None and not str(target).startswith(SAFE_PREFIX):
            raise CheckpointError(
                f"checkpoint {where} names _target_={target!r}; only {SAFE_PREFIX}* is allowed"
            )
        for k, v in config.items():
            check_targets(v, f"{where}.{k}")
    elif isinstance(config, list | tuple):
        for i, v in enumerate(config):
            check_targets(v, f"{where}[{i}]")


def load_weights(policy: VLAPolicy, ckpt: dict, mismatch: str) -> None:
    """Loads the checkpoint's policy weights; `mismatch` starts the error if they do not fit."""
    state = {
        k.removeprefix("policy."): v
        for k, v in ckpt["state_dict"].items()
        if k.startswith("policy.")
    }
    try:
        policy.load_state_dict(state)
    except RuntimeError as e:
        detail = " ".join(str(e).split())[:300]
        raise CheckpointError(f"{mismatch}: {detail}") from None


def policy_from_checkpoint(ckpt: dict, path="checkpoint") -> VLAPolicy:
    """Rebuilds the policy from the config stored in the checkpoint and loads its weights."""
    config = ckpt["vla"]["policy_config"]
    check_targets(config)
    policy = instantiate(config)
    load_weights(policy, ckpt, f"{path}: weights do not fit the architecture its config describes")
    return policy.eval()


def load_policy(path) -> tuple[VLAPolicy, dict]:
    """(policy in eval mode, env config it was trained on) from a checkpoint file."""
    ckpt = read_checkpoint(path)
    return policy_from_checkpoint(ckpt, path), dict(ckpt["vla"]["env_config"])
