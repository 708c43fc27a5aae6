"""Pretrained folders of runs: the card states the run's numbers, `scripts/export.py
format=pretrained` writes one from a checkpoint (and pushes one), and training ends by writing
`<run>/pretrained_model/` with the weights its final evaluation measured."""

import json
import shutil
from types import SimpleNamespace

import pytest
import torch
import yaml

from tests.builders import compose_config, fast_overrides_in, random_batch, run_script_here
from vla.checkpoint import load_policy, read_checkpoint
from vla.commands.export import export
from vla.data.dataset import dataset_path
from vla.errors import ConfigError
from vla.eval.stats import wilson_interval
from vla.keys import IMAGE, STATE, TOKENS
from vla.models.policy import VLAPolicy
from vla.pretrained.run import run_facts, write_run_pretrained
from vla.training.train import train


def same_chunks(a, b) -> bool:
    batch = random_batch(a)
    inputs = batch[IMAGE], batch[STATE], batch[TOKENS]
    a.reset(), b.reset()
    return torch.equal(a.predict_chunk_tensors(*inputs), b.predict_chunk_tensors(*inputs))


def test_the_card_states_the_run(tiny_ckpt, tmp_path):
    cfg = compose_config("train", ["model=tiny", "env.image_size=32", "seed=3"])
    policy, env = load_policy(tiny_ckpt)
    module = SimpleNamespace(policy=policy, policy_config=policy.policy_config, env_config=env)
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["model=tiny", "seed=3"]))
    metrics = dict(
        global_step=120,
        timings=dict(total_s=95.0),
        success_rate=0.75,
        ci95=list(wilson_interval(150, 200)),
        num_episodes=200,
        best_checkpoint=str(tmp_path / "checkpoints" / "best-step00100.ckpt"),
    )
    folder = write_run_pretrained(cfg, module, metrics, tmp_path)
    assert folder == tmp_path / "pretrained_model"
    card = (folder / "README.md").read_text()
    key = dataset_path(".", env, cfg.data.num_episodes, cfg.data.seed, cfg.data.noise_std).name
    assert f"datasets:\n- {key}\n---" in card and key.startswith("reach-")
    for row in (
        "| command | `python scripts/train.py model=tiny seed=3` |",
        "| seed | 3 |",
        "| optimiser steps | 120 |",
        "| wall time | 95 s (1.6 min) |",
        "best by selection: best-step00100.ckpt",
        "Final success: **75.0% [68.6, 80.5] of 200** episodes (95% Wilson interval)",
        "| `image` (or `pixels`) | uint8 | [32, 32, 3] |",
        "| chunk | float32 | [1, 2] | per query; 1 executed before the next |",
    ):
        assert row in card, row
    assert same_chunks(VLAPolicy.from_pretrained(folder), policy)


def test_export_writes_the_folder_of_a_checkpoint_with_its_runs_facts(
    tiny_ckpt, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    run = shutil.copytree(tiny_ckpt.parent.parent, tmp_path / "run")
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["model=tiny"]))
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 5, "data": {}}))
    measured = dict(global_step=0, success_rate=0.5, ci95=[0.1, 0.9], num_episodes=4)
    (run / "metrics.json").write_text(json.dumps(measured | {"timings": {"total_s": 12.0}}))
    here = [f"hydra.run.dir={tmp_path}/export"]
    out = tmp_path / "shared"
    code, stdout, err = run_script_here(
        "export.py", *here, "format=pretrained", f"ckpt_path={run}", f"out={out}", capsys=capsys
    )
    assert code == 0, err
    assert f"{out}: pretrained folder (README.md, config.json, model.safetensors)" in stdout
    card = (out / "README.md").read_text()
    assert "| command | `python scripts/train.py model=tiny` |" in card and "| seed | 5 |" in card
    assert "**50.0% [10.0, 90.0] of 4**" in card and "| weights | last.ckpt at step 0 |" in card
    assert same_chunks(VLAPolicy.from_pretrained(out), load_policy(tiny_ckpt)[0])
    measured["global_step"] = 7  # metrics.json measured other weights: not this card's
    (run / "metrics.json").write_text(json.dumps(measured))
    facts = run_facts(run / "checkpoints" / "last.ckpt", 0, None)
    assert facts["command"] == "python scripts/train.py model=tiny" and "success" not in facts
    for args, message in (
        (["format=pretrained"], "format=pretrained needs ckpt_path="),
        (["format=pretrained", f"ckpt_path={run}"], "format=pretrained needs out=<folder>"),
    ):
        with pytest.raises(ConfigError, match=message):
            export(compose_config("export", args))
    code, _, err = run_script_here(
        "export.py", *here, "format=pretrained", f"ckpt_path={out}", capsys=capsys
    )
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: ckpt_path={out} is a pretrained folder already: give out=")


def test_export_pushes_a_folder_as_it_is(tiny_ckpt, tmp_path, capsys, monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    folder = load_policy(tiny_ckpt)[0].save_pretrained(tmp_path / "pm")
    uploaded = []

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            return f"https://huggingface.co/{repo_id}"

        def upload_folder(self, repo_id, folder_path, **kwargs):
            uploaded.append((repo_id, folder_path))

    monkeypatch.setattr(hub, "HfApi", FakeApi)
    args = ["format=pretrained", f"ckpt_path={folder}", "push_to_hub=someone/vla-reach"]
    code, stdout, err = run_script_here(
        "export.py", f"hydra.run.dir={tmp_path}/x", *args, capsys=capsys
    )
    assert code == 0, err
    assert uploaded == [("someone/vla-reach", str(folder))]
    assert "pushed to https://huggingface.co/someone/vla-reach" in stdout


@pytest.mark.slow
def test_training_ends_by_writing_the_folder_of_the_evaluated_weights(tmp_path):
    cfg = compose_config("train", fast_overrides_in(tmp_path))
    metrics = train(cfg)
    run = tmp_path / "run"
    folder = run / "pretrained_model"
    assert metrics["pretrained_model"] == str(folder)
    assert json.loads((run / "metrics.json").read_text())["pretrained_model"] == str(folder)
    loaded = VLAPolicy.from_pretrained(folder)
    last = read_checkpoint(run / "checkpoints" / "last.ckpt")["state_dict"]  # the EMA weights
    for name, tensor in loaded.state_dict().items():
        if torch.is_tensor(tensor):
            assert torch.equal(tensor, last[f"policy.{name}"]), name
    assert same_chunks(loaded, load_policy(run / "checkpoints" / "last.ckpt")[0])
    card = (folder / "README.md").read_text()
    assert f"| optimiser steps | {metrics['global_step']} |" in card
    assert f"of {cfg.eval.num_episodes}** episodes" in card
