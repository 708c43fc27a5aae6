"""The checkpoint format, in one place: what a checkpoint holds, how it is written, read and
checked. A checkpoint is data, never code.

A checkpoint is Lightning's dict (`state_dict`, optimizer and loop state, callbacks) plus
    vla["format"]          CHECKPOINT_VERSION, checked on every read
    vla["policy_config"]   the resolved Hydra config that rebuilds the policy (vla.* targets only)
    vla["env_config"]      the ReachEnv keyword arguments the policy was trained on (null: its
                           data had no env to roll out in, `vla.training.offline`)
so evaluation needs nothing but the file.

Writes go to a temporary file that is fsynced and renamed over the target, so a kill during a
save leaves the previous checkpoint whole. Reads use `torch.load(weights_only=True)`, which
refuses to unpickle anything but tensors and plain containers.

A pretrained folder (`vla.pretrained`: config.json and model.safetensors) carries the same
policy config and format version with the weights alone; `load_policy` reads either.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from vla import migrations
from vla.config import instantiate
from vla.errors import CheckpointError
from vla.models.policy import VLAPolicy

# 2: the head, keypoints and FiLM are config nodes that target their classes (1 named factories)
# 3: the policy holds the sizes its parts share, each part a partial; one pixel scaling
# 4: token sources (keypoints, objects with their pointer) under `sources`; FiLM in
#    image_encoder; the options removed after 71b5b1e gone from the config
# 5: the parts' classes in files along the data flow (language, vision, state, transformer)
CHECKPOINT_VERSION = 5
MIGRATES_FROM = 2  # the oldest format `migrate_policy_config` turns into this one
SAFE_PREFIX = "vla."


def vla_payload(policy_config: dict | None, env_config: dict | None) -> dict:
    """What a checkpoint carries besides Lightning's own state (stored under "vla")."""
    return {
        "format": CHECKPOINT_VERSION,
        "policy_config": policy_config,
        "env_config": env_config,
    }


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint plugin: atomic writes, reads through `read_checkpoint`."""

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO does not take storage_options")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except Exception as e:
            # Ctrl-C part-way through a record: torch's writer then fails on closing the file
            # (RuntimeError: unexpected pos), hiding the stop, which Lightning must see
            if isinstance(e.__context__, KeyboardInterrupt):
                raise e.__context__ from None
            raise
        finally:
            tmp.unlink(missing_ok=True)

    def load_checkpoint(self, path, map_location=None, weights_only=None):
        return read_checkpoint(path)


def read_checkpoint(path) -> dict:
    """The checkpoint dict, loaded as data only and of this format version.

    Raises CheckpointError naming the file and the problem.
    """
    path = Path(path)
    if (path / "config.json").is_file():  # a pretrained folder: weights, no training state
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is a pretrained folder (weights only, no optimizer or "
            "loop state): training cannot resume from it; pass the run's checkpoints/last.ckpt"
        )
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
    version = ckpt["vla"].get("format") if isinstance(ckpt["vla"], dict) else None
    if version not in range(MIGRATES_FROM, CHECKPOINT_VERSION + 1):
        raise CheckpointError(
            f"ckpt_path={str(path)!r} has checkpoint format {version!r}; this code reads "
            f"formats {MIGRATES_FROM} to {CHECKPOINT_VERSION}"
        )
    if version < CHECKPOINT_VERSION:
        config = migrate_policy_config(ckpt["vla"]["policy_config"], path, version)
        ckpt["state_dict"] = migrations.rename_weights(ckpt["state_dict"], version)
        ckpt["vla"] = ckpt["vla"] | {"format": CHECKPOINT_VERSION, "policy_config": config}
    return ckpt


def migrate_policy_config(config: dict, path, version: int = MIGRATES_FROM) -> dict:
    """A policy config of checkpoint format `version` in this format's layout
    (`vla.migrations`); raises CheckpointError for one this format cannot express."""
    if version < 3:
        config = migrations.format2_to_3(config, path)
    if version < 4:
        config = migrations.format3_to_4(config, path)
    return migrations.format4_to_5(config) if version < 5 else config


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
    load_state(policy, state, mismatch)


def load_state(policy: VLAPolicy, state: dict, mismatch: str) -> None:
    """`policy.load_state_dict(state)`, strict; `mismatch` starts the one-line error naming the
    first missing, unexpected or mis-shaped tensor if they do not fit."""
    try:
        policy.load_state_dict(state)
    except RuntimeError as e:
        problems = [line.strip() for line in str(e).splitlines()[1:] if line.strip()]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        detail = problems[0] if problems else str(e)
        raise CheckpointError(f"{mismatch}: {detail}{more}") from None


def policy_from_checkpoint(ckpt: dict, path="checkpoint") -> VLAPolicy:
    """Rebuilds the policy from the config stored in the checkpoint and loads its weights."""
    config = ckpt["vla"]["policy_config"]
    check_targets(config)
    policy = instantiate(config)
    load_weights(policy, ckpt, f"{path}: weights do not fit the architecture its config describes")
    policy.policy_config, policy.env_config = config, ckpt["vla"]["env_config"]
    return policy.eval()


def load_policy(path, need_env: bool = True) -> tuple[VLAPolicy, dict]:
    """(policy in eval mode, env config it was trained on) from a checkpoint file, a
    pretrained folder (`vla.pretrained`) or a Hub id of one. Without `need_env`, a policy
    trained with no env (a stage-1 VLM) comes with the default env's config, {}."""
    from vla.pretrained.folder import read_pretrained  # it imports this module
    from vla.pretrained.hub import is_pretrained_source

    if is_pretrained_source(path):
        policy = read_pretrained(path)
        env_config = policy.env_config
    else:
        ckpt = read_checkpoint(path)
        env_config, policy = ckpt["vla"]["env_config"], policy_from_checkpoint(ckpt, path)
    if env_config is None and not need_env:
        return policy, {}
    return policy, rollout_env(path, env_config)


def rollout_env(path, env_config: dict | None) -> dict:
    """The env a policy rolls out in; refused when its data had none."""
    if env_config is None:
        raise CheckpointError(
            f"{path} was trained on data with no env to roll out in (data.rollouts=false): "
            "there is no task to evaluate it on"
        )
    return dict(env_config)
