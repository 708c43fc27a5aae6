"""The pretrained folder: a trained policy as data, in the layout robot learning shares
(lerobot's `pretrained_model/`, transformers, timm), readable without Hydra configs, Lightning
or a data folder.

    <folder>/config.json        format, the resolved policy config (vla.* targets only), the
                                tokenizer's vocabulary, the env it was trained in, and the
                                inputs and outputs with their shapes
    <folder>/model.safetensors  every tensor of the policy's state_dict: the weights and the
                                normalisation statistics (buffers), nothing executable
    <folder>/README.md          the model card, with the front matter the Hub reads
                                (`vla.pretrained.card`)

Reading refuses, with one `CheckpointError` naming the file, before any object is built: a
pickled file anywhere in the folder (a folder that ships one is not ours to trust), a config
naming a `_target_` outside `vla.` or holding an interpolation, another format version, and
tensors that are missing, unexpected or of another shape. The format is the checkpoint's
(`vla.checkpoint.CHECKPOINT_VERSION`): both store the same policy config, so an older folder is
migrated the same way an older checkpoint is.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from vla.checkpoint import (
    CHECKPOINT_VERSION,
    MIGRATES_FROM,
    check_targets,
    load_state,
    migrate_policy_config,
)
from vla.config import instantiate
from vla.errors import CheckpointError, ConfigError
from vla.migrations import rename_weights
from vla.models.policy import VLAPolicy
from vla.pretrained.hub import local_folder

CONFIG, WEIGHTS, CARD = "config.json", "model.safetensors", "README.md"
LIBRARY = "vla"
VOCABULARY = "tokenizer._extra_state"  # the one state_dict entry that is not a tensor
ENV_ID = "vla/Reach-v0"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib")
# pickle protocols 2-5 start with PROTO (0x80) and the protocol; torch.save writes a zip
PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")


def is_pretrained_folder(path) -> bool:
    """Whether `path` is a folder holding a config.json (a pretrained folder, or a bad one
    that reading it will describe)."""
    return (Path(path) / CONFIG).is_file()


def folder_config(
    policy: VLAPolicy, policy_config: dict, env_config: dict | None, vocabulary: dict
) -> dict:
    """config.json's content for `policy` built from `policy_config`."""
    size, state_dim = policy_config.get("image_size"), int(policy.normalizer.state_dim)
    action_dim, chunk = int(policy.normalizer.action_dim), int(policy.chunk_size)
    return {
        "format": CHECKPOINT_VERSION,
        "library": LIBRARY,
        "policy_config": policy_config,
        "vocabulary": vocabulary,
        "env_id": ENV_ID if env_config is not None else None,
        "env_config": env_config,
        "inputs": {
            "image": {"dtype": "uint8", "shape": [size, size, 3], "range": [0, 255]},
            "state": {"dtype": "float32", "shape": [state_dim], "units": "env"},
            "instruction": {"dtype": "str", "max_words": vocabulary["max_len"]},
        },
        "outputs": {
            "action": {"dtype": "float32", "shape": [action_dim], "range": [-1.0, 1.0]},
            "chunk": {"dtype": "float32", "shape": [chunk, action_dim]},
            "n_action_steps": int(policy.n_action_steps),
        },
    }


def write_pretrained(
    policy: VLAPolicy,
    folder,
    policy_config: dict,
    env_config: dict | None = None,
    card: str | None = None,
) -> Path:
    """Writes `policy` as a pretrained folder, replacing one written before (all or nothing:
    the files go to a sibling folder that is renamed into place).

    Raises ConfigError if `folder` exists with other content (it is not replaced)."""
    folder = Path(folder)
    if folder.is_dir() and any(folder.iterdir()) and not is_pretrained_folder(folder):
        raise ConfigError(f"{folder} exists and is not a pretrained folder: it is not replaced")
    check_targets(policy_config, f"{folder / CONFIG} policy_config")
    state = dict(policy.state_dict())
    vocabulary = state.pop(VOCABULARY)
    others = sorted(k for k, v in state.items() if not isinstance(v, Tensor))
    if others:
        raise ValueError(f"state_dict entries that are not tensors, unknown here: {others}")
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    config = folder_config(policy, policy_config, env_config, vocabulary)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp, old = (folder.with_name(f".{folder.name}.{what}-{os.getpid()}") for what in ("tmp", "old"))
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        save_file(tensors, tmp / WEIGHTS, metadata={"format": "pt"})
        (tmp / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
        if card is not None:
            (tmp / CARD).write_text(card)
        if folder.exists():
            os.replace(folder, old)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return folder


def read_pretrained(source, device="cpu", revision: str | None = None) -> VLAPolicy:
    """The policy (eval mode, on `device`) of a pretrained folder or Hub id; it remembers its
    `policy_config`, `env_config` and `model_card` so it can be saved again as it came."""
    folder = local_folder(source, revision)
    config = read_config(folder)
    weights = folder / WEIGHTS
    try:
        tensors = load_file(weights, device="cpu")
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{weights} is not a readable safetensors file: {e}") from None
    if config["format"] < CHECKPOINT_VERSION:  # the tensors' names of that format
        named = rename_weights({f"policy.{k}": v for k, v in tensors.items()}, config["format"])
        tensors = {k.removeprefix("policy."): v for k, v in named.items()}
    policy = instantiate(config["policy_config"])
    mismatch = f"{weights}: the tensors do not fit the architecture {folder / CONFIG} describes"
    load_state(policy, tensors | {VOCABULARY: config["vocabulary"]}, mismatch)
    policy.policy_config, policy.env_config = config["policy_config"], config["env_config"]
    policy.model_card = (folder / CARD).read_text() if (folder / CARD).is_file() else None
    return policy.to(device).eval()


def read_config(folder: Path) -> dict:
    """config.json of `folder`, checked (and migrated from an older format) before anything
    it names is built. Raises CheckpointError naming the file and the problem."""
    check_files(folder)
    path = folder / CONFIG
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not JSON: {e}") from None
    needed = ("format", "policy_config", "vocabulary", "env_config")
    if not isinstance(config, dict) or any(k not in config for k in needed):
        raise CheckpointError(f"{path} is not a vla policy's config: it needs keys {list(needed)}")
    version = config["format"]
    if not isinstance(version, int) or version not in range(MIGRATES_FROM, CHECKPOINT_VERSION + 1):
        raise CheckpointError(
            f"{path} has format {version!r}; this code reads formats {MIGRATES_FROM} to "
            f"{CHECKPOINT_VERSION}"
        )
    try:
        check_targets(config["policy_config"], f"{path} policy_config")
        check_plain(config["policy_config"], f"{path} policy_config")
    except CheckpointError as e:
        raise CheckpointError(str(e).removeprefix("checkpoint ")) from None
    if version < CHECKPOINT_VERSION:
        config["policy_config"] = migrate_policy_config(config["policy_config"], path, version)
    vocab = config["vocabulary"]
    if not (
        isinstance(vocab, dict)
        and isinstance(vocab.get("vocab"), list)
        and all(isinstance(w, str) for w in vocab["vocab"])
        and isinstance(vocab.get("max_len"), int)
    ):
        raise CheckpointError(f"{path}: vocabulary must be {{'vocab': [words], 'max_len': int}}")
    return config


def check_files(folder: Path) -> None:
    """Refuses a folder that is missing a file or holds a pickled one (by name or by its first
    bytes), without reading more than those bytes."""
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a pretrained folder: it does not exist")
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        with open(path, "rb") as f:
            head = f.read(4)
        if path.suffix.lower() in PICKLE_SUFFIXES or head.startswith(PICKLE_MAGIC):
            raise CheckpointError(
                f"{path} is a pickled file, which can run code when read: a pretrained folder "
                f"holds only {CONFIG}, {WEIGHTS} and {CARD}"
            )
    for name in (CONFIG, WEIGHTS):
        if not (folder / name).is_file():
            raise CheckpointError(f"{folder / name} is missing: {folder} is no pretrained folder")


def check_plain(config, where: str) -> None:
    """Refuses OmegaConf interpolations (`${...}`): a stored config is resolved, plain values."""
    if isinstance(config, dict):
        for k, v in config.items():
            check_plain(v, f"{where}.{k}")
    elif isinstance(config, list):
        for i, v in enumerate(config):
            check_plain(v, f"{where}[{i}]")
    elif isinstance(config, str) and "${" in config:
        raise CheckpointError(f"{where}={config!r} is an interpolation; only plain values are read")
