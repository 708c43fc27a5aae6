"""The pretrained folder: the same policy as its checkpoint, bit for bit; `select_action` takes
the actions `PolicyRunner` takes; a Hub id goes through huggingface_hub; and every planted bad
folder is refused in one line, with nothing it names run."""

import json
import os
import pickle
import shutil
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.builders import build_policy, random_batch
from vla.checkpoint import CHECKPOINT_VERSION, load_policy, read_checkpoint
from vla.errors import CheckpointError, ConfigError
from vla.eval.runner import PolicyRunner
from vla.keys import IMAGE, STATE, TOKENS
from vla.lerobot.env import ENV_ID as LEROBOT_ENV_ID
from vla.models.policy import VLAPolicy

FILES = ["README.md", "config.json", "model.safetensors"]  # a folder's files, sorted
HUB_FILES = ["config.json", "model.safetensors", "README.md"]  # all a download asks for


@pytest.fixture(scope="module")
def saved(chunked_ckpt, tmp_path_factory):
    """The chunked checkpoint's policy (flow head, chunks of 4, 2 executed per query) and its
    pretrained folder."""
    policy, env = load_policy(chunked_ckpt)
    return policy, env, policy.save_pretrained(tmp_path_factory.mktemp("pm") / "pretrained_model")


def chunks(policy, batch):
    policy.reset()  # the flow head's noise stream from its start
    return policy.predict_chunk_tensors(batch[IMAGE], batch[STATE], batch[TOKENS])


def test_the_folder_holds_data_only_and_gives_bit_equal_chunks(saved):
    policy, env, folder = saved
    assert sorted(p.name for p in folder.iterdir()) == FILES
    config = json.loads((folder / "config.json").read_text())
    assert config["format"] == CHECKPOINT_VERSION and config["env_config"] == env
    assert config["inputs"]["image"]["shape"] == [32, 32, 3]
    outputs = config["outputs"]
    assert outputs["chunk"]["shape"] == [4, 2] and outputs["n_action_steps"] == 2
    tensors = load_file(folder / "model.safetensors")
    state = policy.state_dict()
    assert set(tensors) == set(state) - {"tokenizer._extra_state"}
    assert torch.equal(tensors["normalizer.action_high"], policy.normalizer.action_high)
    loaded = VLAPolicy.from_pretrained(folder)
    assert not loaded.training and loaded.tokenizer.vocab == policy.tokenizer.vocab
    batch = random_batch(policy, batch_size=6)
    assert torch.equal(chunks(loaded, batch), chunks(policy, batch))
    assert chunks(policy, batch).shape == (6, 4, 2)
    front = (folder / "README.md").read_text().split("---")[1]
    assert "library_name: vla" in front and "license: mit" in front


def episode_actions(env, seed: int, act) -> list[np.ndarray]:
    obs, _ = env.reset(seed=seed)
    actions = []
    for _ in range(10):
        actions.append(act(obs))
        obs, _, terminated, truncated, _ = env.step(actions[-1])
        if terminated or truncated:
            break
    return actions


def test_select_action_takes_the_actions_policy_runner_takes(saved):
    policy, env_config, folder = saved
    loaded = VLAPolicy.from_pretrained(folder)
    env = gym.make("vla/Reach-v0", **env_config)
    runner = PolicyRunner(policy)
    for seed in (0, 1):
        runner.reset()
        expected = episode_actions(env, seed, runner.act)
        loaded.reset()
        loaded.select_action(env.reset(seed=7)[0])  # a chunk left half spent, then reset:
        loaded.reset()  # nothing of it may leak into the next episode
        got = episode_actions(env, seed, loaded.select_action)
        assert len(got) == len(expected) >= 3
        np.testing.assert_array_equal(np.stack(got), np.stack(expected))
    lerobot = gym.make(LEROBOT_ENV_ID, **env_config)  # pixels, agent_pos; the task apart
    loaded.reset()
    got = episode_actions(
        lerobot, 0, lambda obs: loaded.select_action(obs, lerobot.get_wrapper_attr("task"))
    )
    runner.reset()
    np.testing.assert_array_equal(np.stack(got), np.stack(episode_actions(env, 0, runner.act)))
    with pytest.raises(ValueError, match=r"no \['instruction'\]"):
        loaded.select_action(lerobot.reset(seed=0)[0])


def test_a_hub_id_reads_the_same_folder(saved, monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    policy, _, folder = saved
    asked = {}

    def snapshot_download(repo_id, revision=None, allow_patterns=None):
        asked.update(repo_id=repo_id, revision=revision, files=allow_patterns)
        return str(folder)

    monkeypatch.setattr(hub, "snapshot_download", snapshot_download)
    loaded = VLAPolicy.from_pretrained("someone/vla-reach", revision="v1")
    assert asked == dict(repo_id="someone/vla-reach", revision="v1", files=HUB_FILES)
    batch = random_batch(policy)
    assert torch.equal(chunks(loaded, batch), chunks(policy, batch))
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    with pytest.raises(CheckpointError, match=r"needs huggingface_hub: pip install 'vla\[hub\]'"):
        VLAPolicy.from_pretrained("someone/vla-reach")


def test_push_to_hub_uploads_the_three_files(saved, monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    policy, _, _ = saved
    calls = []

    class FakeApi:
        def __init__(self, token=None):
            calls.append(("token", token))

        def create_repo(self, repo_id, **kwargs):
            calls.append(("create", repo_id, kwargs["private"]))
            return f"https://huggingface.co/{repo_id}"

        def upload_folder(self, repo_id, folder_path, allow_patterns, **kwargs):
            names = sorted(os.listdir(folder_path))
            calls.append(("upload", repo_id, names, allow_patterns))

    monkeypatch.setattr(hub, "HfApi", FakeApi)
    url = policy.push_to_hub("someone/vla-reach", private=True)
    assert url == "https://huggingface.co/someone/vla-reach"
    assert calls == [
        ("token", None),
        ("create", "someone/vla-reach", True),
        ("upload", "someone/vla-reach", FILES, HUB_FILES),
    ]


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _edit_config(folder, edit):
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))


def _edit_tensors(folder, edit):
    tensors = load_file(folder / "model.safetensors")
    edit(tensors)
    save_file(tensors, folder / "model.safetensors")


def _os_system(folder) -> dict:
    """A config node that, built, would run a shell command."""
    return {"_target_": "os.system", "_args_": [f"touch {folder.parent}/pwned"]}


def _pickle0(folder, name):
    """Protocol 0, whose first bytes are text: only the name tells."""
    (folder / name).write_bytes(pickle.dumps(_RunsCode(folder.parent / "pwned"), protocol=0))


def _pickle(folder, name):
    torch.save({"weights": _RunsCode(folder.parent / "pwned")}, folder / name)


PLANTED = {  # what is planted -> what the one line says
    "pickle by name": (lambda f: _pickle0(f, "weights.pkl"), r"weights.pkl is a pickled file"),
    "pickle, any name": (lambda f: _pickle(f, "notes.dat"), r"notes.dat is a pickled file"),
    "target outside vla": (
        lambda f: _edit_config(f, lambda c: c["policy_config"].update(head=_os_system(f))),
        r"config.json policy_config.head names _target_='os.system'; only vla",
    ),
    "interpolation": (
        lambda f: _edit_config(f, lambda c: c["policy_config"].update(d_model="${oc.env:HOME}")),
        r"config.json policy_config.d_model='\$\{oc.env:HOME\}' is an interpolation",
    ),
    "another format": (
        lambda f: _edit_config(f, lambda c: c.update(format=CHECKPOINT_VERSION + 1)),
        rf"config.json has format {CHECKPOINT_VERSION + 1}; this code reads formats",
    ),
    "missing tensor": (
        lambda f: _edit_tensors(f, lambda t: t.pop("normalizer.state_mean")),
        r'model.safetensors: the tensors do not fit .* Missing key.* "normalizer.state_mean"',
    ),
    "mis-shaped tensor": (
        lambda f: _edit_tensors(f, lambda t: t.update({"normalizer.action_low": torch.zeros(3)})),
        r"model.safetensors: the tensors do not fit .* size mismatch for normalizer.action_low",
    ),
    "no weights": (lambda f: (f / "model.safetensors").unlink(), r"model.safetensors is missing"),
    "not safetensors": (
        lambda f: (f / "model.safetensors").write_bytes(b"\x00" * 64),
        r"model.safetensors is not a readable safetensors file",
    ),
}


@pytest.mark.parametrize("case", list(PLANTED))
def test_a_bad_folder_is_refused_in_one_line_running_nothing(case, saved, tmp_path):
    folder = shutil.copytree(saved[2], tmp_path / "pretrained_model")
    plant, message = PLANTED[case]
    plant(folder)
    with pytest.raises(CheckpointError, match=message) as refused:
        VLAPolicy.from_pretrained(folder)
    assert "\n" not in str(refused.value) and str(folder) in str(refused.value)
    assert not (tmp_path / "pwned").exists()


def test_eval_reads_the_folder_and_training_cannot_resume_from_it(saved):
    policy, env, folder = saved
    loaded, loaded_env = load_policy(folder)  # what eval, visualize and compare_to call
    assert loaded_env == env and isinstance(loaded, VLAPolicy)
    with pytest.raises(CheckpointError, match="is a pretrained folder .* cannot resume"):
        read_checkpoint(folder)


def test_a_policy_built_by_hand_needs_its_config_and_nothing_else_is_replaced(saved, tmp_path):
    with pytest.raises(ValueError, match="needs policy_config"):
        build_policy().save_pretrained(tmp_path / "x")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a pretrained folder: it is not replaced"):
        saved[0].save_pretrained(mine)
    assert [p.name for p in mine.iterdir()] == ["keep.txt"]
