"""The checkpoint format: safe reads, refused foreign or damaged files, versions, atomic writes."""

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.builders import FAST_RUN, compose_config, random_batch
from vla import checkpoint
from vla.checkpoint import (
    CHECKPOINT_VERSION,
    AtomicCheckpointIO,
    CheckpointError,
    load_policy,
    read_checkpoint,
    vla_payload,
)
from vla.config import instantiate
from vla.keys import IMAGE, STATE, TOKENS
from vla.migrations import rename_weights
from vla.training.module import policy_config
from vla.training.train import train


def test_random_bytes_and_truncated_checkpoints_are_refused(tiny_ckpt, tmp_path):
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        read_checkpoint(junk)
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(tiny_ckpt.read_bytes()[:5000])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        read_checkpoint(cut)
    not_ours = tmp_path / "plain.ckpt"
    torch.save({"weights": torch.zeros(3)}, not_ours)
    with pytest.raises(CheckpointError, match="not a vla training checkpoint"):
        read_checkpoint(not_ours)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_checkpoint_of_another_format_version_is_refused(tiny_ckpt, tmp_path):
    ckpt = torch.load(tiny_ckpt, weights_only=True)
    ckpt["vla"]["format"] = CHECKPOINT_VERSION + 1
    other = tmp_path / "future.ckpt"
    torch.save(ckpt, other)
    with pytest.raises(CheckpointError, match=rf"future.ckpt' has checkpoint format {CHECKPOINT_VERSION + 1}; .* formats 2 to {CHECKPOINT_VERSION}"):  # fmt: skip
        load_policy(other)
    ckpt["vla"]["format"] = 1  # before the heads were config groups: its config names factories
    torch.save(ckpt, other)
    with pytest.raises(CheckpointError, match="has checkpoint format 1; this code reads formats 2"):
        load_policy(other)
    del ckpt["vla"]["format"]
    torch.save(ckpt, other)
    with pytest.raises(CheckpointError, match="has checkpoint format None"):
        read_checkpoint(other)


# the resolved policy config format-2 code saved for these overrides (written by that code)
V2_CONFIG = Path(__file__).with_name("policy_config_v2.json")
V2_OVERRIDES = ["model=tiny", "env.image_size=32", "model.chunk_size=2", "model.n_action_steps=2"]


def test_a_format_2_checkpoint_loads_as_the_same_policy(tmp_path):
    cfg = compose_config("train", V2_OVERRIDES)
    torch.manual_seed(0)
    policy = instantiate(cfg.model).eval()
    old = {"format": 2, "policy_config": json.loads(V2_CONFIG.read_text()), "env_config": {}}
    state = {f"policy.{k}": v for k, v in policy.state_dict().items()}
    torch.save({"vla": old, "state_dict": state}, tmp_path / "v2.ckpt")
    ckpt = read_checkpoint(tmp_path / "v2.ckpt")
    assert ckpt["vla"]["format"] == CHECKPOINT_VERSION
    assert ckpt["vla"]["policy_config"] == policy_config(cfg)  # what this code saves
    loaded, _ = load_policy(tmp_path / "v2.ckpt")
    batch = random_batch(policy)
    with torch.no_grad():
        features = [p.encode(batch[IMAGE], batch[STATE], batch[TOKENS]).features for p in (policy, loaded)]  # fmt: skip
    torch.testing.assert_close(features[0], features[1])
    assert (loaded.chunk_size, loaded.n_action_steps) == (2, 2)
    changed = json.loads(V2_CONFIG.read_text())
    changed["image_encoder"]["std"] = [0.25] * 3
    torch.save({"vla": old | {"policy_config": changed}, "state_dict": state}, tmp_path / "x.ckpt")
    with pytest.raises(CheckpointError, match="format 2.*image_encoder.std other than 0.5"):
        read_checkpoint(tmp_path / "x.ckpt")
    changed = json.loads(V2_CONFIG.read_text())
    changed["readout"]["n_heads"] = 2  # parts that disagreed about a shared size
    torch.save({"vla": old | {"policy_config": changed}, "state_dict": state}, tmp_path / "x.ckpt")
    with pytest.raises(CheckpointError, match="readout.n_heads other than the policy's n_heads=4"):
        read_checkpoint(tmp_path / "x.ckpt")


# format-3 and format-4 policy configs and weight names as that code saved them (written by
# 71b5b1e and 3c9e0d6)
OLD = {v: json.loads(Path(__file__).with_name(f"policy_config_v{v}.json").read_text()) for v in (3, 4)}  # fmt: skip


@pytest.mark.parametrize("version", [3, 4])
@pytest.mark.parametrize(
    "recipe, overrides", [("default", []), ("objects", ["model/objects=slots"])]
)
def test_an_older_checkpoint_loads_as_the_same_policy(tmp_path, version, recipe, overrides):
    cfg = compose_config("train", ["model=tiny", "env.image_size=32", *overrides])
    torch.manual_seed(0)
    policy = instantiate(cfg.model).eval()
    old_names = OLD[version][recipe]["weights"]
    new_names = list(policy.state_dict())
    renamed = rename_weights({f"policy.{k}": None for k in old_names}, version)
    assert sorted(k.removeprefix("policy.") for k in renamed) == sorted(new_names)
    new_of = dict(zip(old_names, (k.removeprefix("policy.") for k in renamed), strict=True))
    state = {f"policy.{k}": policy.state_dict()[new_of[k]] for k in old_names}
    config = OLD[version][recipe]["policy_config"]
    old = {"format": version, "policy_config": config, "env_config": {}}
    torch.save({"vla": old, "state_dict": state}, tmp_path / "old.ckpt")
    assert read_checkpoint(tmp_path / "old.ckpt")["vla"]["policy_config"] == policy_config(cfg)
    loaded, _ = load_policy(tmp_path / "old.ckpt")
    batch = random_batch(policy)
    with torch.no_grad():
        features = [p.encode(batch[IMAGE], batch[STATE], batch[TOKENS]).features for p in (policy, loaded)]  # fmt: skip
    torch.testing.assert_close(features[0], features[1], rtol=0, atol=0)
    if version == 3:
        removed = copy.deepcopy(old)
        removed["policy_config"]["referents"] = {"_target_": "vla.models.referents.ReferentSelector"}  # fmt: skip
        torch.save({"vla": removed, "state_dict": state}, tmp_path / "x.ckpt")
        with pytest.raises(
            CheckpointError, match="uses model/referents, which was removed .*git checkout 71b5b1e"
        ):
            read_checkpoint(tmp_path / "x.ckpt")


def test_checkpoint_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.ckpt"
    torch.save({"vla": {}, "state_dict": {}, "payload": _RunsCode(marker)}, evil)
    with pytest.raises(CheckpointError, match="refused by the safe loader"):
        read_checkpoint(evil)
    assert not marker.exists()


def test_checkpoint_config_may_only_name_vla_classes(tiny_ckpt, tmp_path):
    ckpt = torch.load(tiny_ckpt, weights_only=True)
    ckpt["vla"]["policy_config"]["head"]["_target_"] = "os.system"
    bad = tmp_path / "foreign.ckpt"
    torch.save(ckpt, bad)
    with pytest.raises(CheckpointError, match="only vla"):
        load_policy(bad)


def test_checkpoint_of_a_different_architecture_is_refused(tiny_ckpt, compose_cfg, tmp_path):
    cfg = compose_cfg(
        "train",
        [
            *FAST_RUN,
            "model.depth=3",
            f"ckpt_path={tiny_ckpt}",
            f"paths.output_dir={tmp_path}/run",
            f"data.dir={tmp_path}/d",
        ],
    )
    with pytest.raises(CheckpointError, match="trained with model.depth=2, this config has 3"):
        train(cfg)
    ckpt = torch.load(tiny_ckpt, weights_only=True)
    ckpt["vla"]["policy_config"]["depth"] = 3
    torch.save(ckpt, tmp_path / "mismatch.ckpt")
    with pytest.raises(CheckpointError, match="do not fit the architecture"):
        load_policy(tmp_path / "mismatch.ckpt")


class InterruptedAfter1000Bytes(io.FileIO):
    """A file Ctrl-C interrupts part-way through torch.save's records."""

    def write(self, data):
        if self.tell() + len(data) > 1000:
            raise KeyboardInterrupt
        return super().write(data)


def test_ctrl_c_during_a_save_is_a_stop_and_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    """torch's writer answers an interrupted record with a RuntimeError when it closes; the
    save raises the KeyboardInterrupt, so Lightning stops the run as for any Ctrl-C."""
    atomic = AtomicCheckpointIO()
    path = tmp_path / "last.ckpt"
    atomic.save_checkpoint({"vla": vla_payload({}, {}), "state_dict": {"w": torch.ones(2)}}, path)

    monkeypatch.setattr(checkpoint, "open", InterruptedAfter1000Bytes, raising=False)
    new = {"vla": vla_payload({}, {}), "state_dict": {"w": torch.zeros(10_000)}}
    with pytest.raises(KeyboardInterrupt):
        atomic.save_checkpoint(new, path)
    assert torch.equal(read_checkpoint(path)["state_dict"]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


FULL_DISK = """
import resource, signal, sys, torch
from vla.checkpoint import AtomicCheckpointIO, vla_payload
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # no file past 1 MiB
big = {"vla": vla_payload({}, {}), "state_dict": {"w": torch.zeros(1 << 20)}}  # 4 MiB
try:
    AtomicCheckpointIO().save_checkpoint(big, sys.argv[1])
except (OSError, RuntimeError) as e:
    print(type(e).__name__, e)
    sys.exit(3)
"""


@pytest.mark.slow
def test_a_disk_that_fills_during_a_save_leaves_the_previous_checkpoint(tmp_path):
    """A file-size limit (`ulimit -f`) stands in for a full disk: the write fails part-way."""
    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint(
        {"vla": vla_payload({}, {}), "state_dict": {"w": torch.ones(2)}}, path
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(path)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 3, out.stdout + out.stderr[-2000:]  # the save failed, and said so
    assert torch.equal(read_checkpoint(path)["state_dict"]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]  # no temporary file left
