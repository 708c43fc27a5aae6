"""Resuming a run: its own config and folder, one line for a conflict, the step goes on."""

import re
import signal
import subprocess
import sys

import pytest
import yaml

from tests.builders import run_script_here
from tests.training.test_reliability import ROOT, _train_in_subprocess, _wait_for_step
from vla.checkpoint import AtomicCheckpointIO, read_checkpoint
from vla.config import instantiate
from vla.errors import CheckpointError, ConfigError
from vla.run_folder import run_folder_of
from vla.training.resume import check_resumable, resume_argv


def _run_folder(tmp_path, overrides):
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    return run


def test_resume_argv_puts_the_runs_overrides_first_and_the_new_ones_win(tmp_path):
    run = _run_folder(tmp_path, ["model=tiny", "trainer.max_epochs=10", "seed=3"])
    args = resume_argv([f"ckpt_path={run}", "seed=4"])
    assert args == [
        "model=tiny",
        "trainer.max_epochs=10",
        f"ckpt_path={run}",
        "seed=4",
        f"hydra.run.dir={run.resolve()}",
        "hydra.output_subdir=null",  # the saved record changes only once the resume is checked
    ]
    for ckpt in (run / "checkpoints", run / "checkpoints" / "last.ckpt"):
        assert run_folder_of(ckpt) == run.resolve()
    elsewhere = [f"ckpt_path={tmp_path}/last.ckpt", "seed=4"]  # not in a run folder
    assert resume_argv(elsewhere) == elsewhere
    assert resume_argv(["-m", f"ckpt_path={run}"]) == ["-m", f"ckpt_path={run}"]
    moved = resume_argv([f"ckpt_path={run}", "hydra.run.dir=/tmp/x"])
    assert moved[-1] == "hydra.run.dir=/tmp/x" and "hydra.output_subdir=null" not in moved


def test_a_changed_architecture_is_one_line_naming_the_key(compose_cfg, tiny_ckpt):
    cfg = compose_cfg("train", ["model=small", "env.image_size=32", f"ckpt_path={tiny_ckpt}"])
    policy = instantiate(cfg.model)
    with pytest.raises(CheckpointError) as e:
        check_resumable(cfg, policy)
    message = str(e.value)
    assert "\n" not in message
    assert re.search(r"was trained with model\.d_model=64, this config has 128", message)
    assert message.endswith("leave out ckpt_path to start a new run)")


def test_fewer_epochs_than_the_checkpoint_reached_is_one_line(compose_cfg, tiny_ckpt, tmp_path):
    ckpt = read_checkpoint(tiny_ckpt) | {"epoch": 3}
    AtomicCheckpointIO().save_checkpoint(ckpt, tmp_path / "epoch3.ckpt")
    overrides = ["model=tiny", "env.image_size=32", f"ckpt_path={tmp_path}/epoch3.ckpt"]
    cfg = compose_cfg("train", [*overrides, "trainer.max_epochs=2"])
    with pytest.raises(ConfigError, match="stopped in epoch 4, past trainer.max_epochs=2"):
        check_resumable(cfg, instantiate(cfg.model))
    cfg = compose_cfg("train", [*overrides, "trainer.max_epochs=5"])
    assert check_resumable(cfg, instantiate(cfg.model)) == tmp_path / "epoch3.ckpt"


@pytest.mark.slow
def test_ctrl_c_saves_and_the_run_resumes_as_printed_in_its_own_folder(tmp_path, capsys):
    run = tmp_path / "run"
    proc = _train_in_subprocess(tmp_path, "callbacks.last_checkpoint.every_n_train_steps=5")
    _wait_for_step(run / "checkpoints" / "last.ckpt", 5, proc)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=300)
    stderr = (tmp_path / "stderr.txt").read_text()
    hint = re.search(
        r"^stopped at step (\d+): resume with: (python scripts/train.py ckpt_path=\S+)$",
        stderr,
        re.M,
    )
    assert proc.returncode == 130 and hint and "Traceback" not in stderr, stderr[-2000:]
    output = stderr + (tmp_path / "stdout.txt").read_text()
    assert "error:" not in output and "KeyboardInterrupt" not in output
    assert hint.group(0) in (run / "train.log").read_text()
    step = read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"]
    assert step == int(hint.group(1))

    # as printed, with a step limit; the run's own trainer.max_epochs=100 is not restated
    args = hint.group(2).split()[1:] + [f"trainer.max_steps={step + 3}", "eval.num_episodes=4"]
    out = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    console = out.stdout + out.stderr
    assert out.returncode == 0, console[-2000:]
    assert "max_epochs=100" in console and f"resuming from {run}" in console
    for noise in ("dirpath has changed", "not resumable", "exists and is not empty", "Restor"):
        assert noise not in console
    assert read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"] == step + 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "run", "stderr.txt", "stdout.txt"]
    saved = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text())
    assert "trainer.max_epochs=100" in saved and f"trainer.max_steps={step + 3}" in saved

    # a changed architecture is refused in one line, and the run's record stays as it was
    code, _, err = run_script_here("train.py", *args[1:], "model=small", capsys=capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "was trained with model.d_model=64, this config has 128" in err
    assert yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text()) == saved


@pytest.mark.slow
def test_sigterm_saves_the_step_reached_and_the_printed_command_goes_on(tmp_path):
    """What `kill`, `docker stop`, Kubernetes and SLURM send: the same stop as Ctrl-C."""
    run = tmp_path / "run"
    proc = _train_in_subprocess(tmp_path, "callbacks.last_checkpoint.every_n_train_steps=3")
    _wait_for_step(run / "checkpoints" / "last.ckpt", 3, proc)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=300)
    output = (tmp_path / "stdout.txt").read_text() + (tmp_path / "stderr.txt").read_text()
    stop = re.search(
        r"^stopped at step (\d+): resume with: (python scripts/train.py ckpt_path=\S+)$",
        output,
        re.M,
    )
    assert proc.returncode == 143 and stop, output[-2000:]
    for noise in ("error:", "Traceback", "SIGTERM", "no checkpoint"):
        assert noise not in output
    step = int(stop.group(1))
    assert read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"] == step >= 3

    args = stop.group(2).split()[1:] + [f"trainer.max_steps={step + 2}", "eval.num_episodes=2"]
    out = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
    assert f"resuming from {run}/checkpoints/last.ckpt: step {step}," in out.stdout + out.stderr
    assert read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"] == step + 2
