"""What a user sees from the commands: the console, the run's log file, the TensorBoard
rollouts, and commands that forgive a run folder or a typo."""

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.builders import FAST_RUN, run_script_here
from vla.cli import override_hints
from vla.config import instantiate
from vla.console import FinalLines
from vla.errors import CheckpointError
from vla.eval.evaluate import evaluate

ROOT = Path(__file__).resolve().parents[1]
NOISE = (
    "litlogger",
    "LeafSpec",
    "weights_only",
    "FLOPs",
    "Total Flops",
    "Warning",
    "GPU available",
)
NOISE += ("TPU available", "`Trainer.fit` stopped", "rollouts: ", "collecting demos: ", "it/s]")


def run_script(script: str, *overrides: str, cwd=ROOT) -> subprocess.CompletedProcess:
    """The script as a user runs it, output redirected (not a terminal), on this checkout.
    Output is decoded here, not with `text=True`, which would turn carriage returns into
    newlines."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *overrides],
        capture_output=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out.stdout, out.stderr = out.stdout.decode(), out.stderr.decode()
    return out


# the tests that read it run in one test process, so it runs once (pytest --dist loadgroup)
ONE_RUN = pytest.mark.xdist_group("console_fast_run")


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory):
    """One `debug=fast` training run whose output went to pipes, shared by the tests below; its
    run folder is paths.output_dir, apart from Hydra's own folder."""
    tmp = tmp_path_factory.mktemp("console")
    run = [f"paths.output_dir={tmp}/run", f"hydra.run.dir={tmp}/hydra"]
    out = run_script("train.py", *FAST_RUN, *run, f"data.dir={tmp}/data")
    assert out.returncode == 0, out.stderr[-2000:]
    return tmp / "run", out


@pytest.mark.slow
@ONE_RUN
def test_console_shows_our_summary_and_no_library_noise(fast_run, compose_cfg):
    _, out = fast_run
    console = out.stdout + out.stderr
    assert [n for n in NOISE if n in console] == []
    policy = instantiate(compose_cfg("train", ["model=tiny", "env.image_size=32"]).model)
    words = policy.tokenizer.max_len  # the longest instruction the grammar makes
    # 32 px: 4 patches of 16 px, 8 keypoints, the words, the state and the readout
    assert policy.num_tokens() == 4 + 8 + words + 1 + 1
    summary = f"{policy.num_tokens()} tokens with an instruction of {words} words"
    assert "GFLOP per sample" in out.stdout and summary in out.stdout
    assert "smoke run" in out.stdout and "run directory:" in out.stdout
    assert "success rate" in out.stdout


@pytest.mark.slow
@ONE_RUN
def test_redirected_progress_is_a_few_lines_without_redraws(fast_run):
    _, out = fast_run
    assert "\r" not in out.stdout + out.stderr
    progress = [line for line in out.stdout.splitlines() if line.startswith("epoch 1/1")]
    assert len(progress) == 3  # 40%, 80% (5 batches, 4 lines an epoch) and the epoch's end
    assert "done in" in progress[-1] and "val/loss" in progress[-1]


@pytest.mark.slow
@ONE_RUN
def test_run_log_is_a_record_of_the_run(fast_run):
    run, _ = fast_run
    log = (run / "train.log").read_text()
    for line in ("building the policy", "demonstrations: 60 episodes", "rollouts at step 5"):
        assert line in log
    assert "success rate" in log and f"run directory: {run}" in log
    assert (run / "metrics.json").is_file() and (run / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.slow
@ONE_RUN
def test_tensorboard_holds_animated_rollouts_and_only_measured_success(fast_run):
    run, _ = fast_run
    events = EventAccumulator(str(run / "tensorboard")).Reload()
    gif = events.Images("rollout/episode_0")[-1].encoded_image_string
    assert gif[:6] == b"GIF89a"
    assert Image.open(io.BytesIO(gif)).n_frames > 1
    # no placeholder at step 0: the first point is the first rollout evaluation's
    assert {"lr-AdamW/decay", "lr-AdamW/no_decay"} <= set(events.Tags()["scalars"])
    steps = [e.step for e in events.Scalars("eval/success_rate")]
    assert steps and min(steps) > 0


@pytest.mark.slow
@ONE_RUN
def test_eval_accepts_a_run_folder(fast_run, compose_cfg, tmp_path, caplog):
    run, _ = fast_run
    overrides = ["eval.num_episodes=2", "eval.num_envs=2", "eval.record=1"]
    cfg = compose_cfg("eval", [f"ckpt_path={run}", *overrides, f"paths.output_dir={tmp_path}"])
    with caplog.at_level(logging.INFO):
        metrics = evaluate(cfg)
    assert metrics["ckpt_path"] == str(run / "checkpoints" / "last.ckpt")
    assert f"using {run / 'checkpoints' / 'last.ckpt'}" in caplog.text
    (mp4,) = metrics["videos"]
    assert Path(mp4).read_bytes()[4:8] == b"ftyp"  # an MP4 container
    with pytest.raises(CheckpointError, match="without checkpoints/last.ckpt"):
        evaluate(compose_cfg("eval", [f"ckpt_path={tmp_path}", f"paths.output_dir={tmp_path}"]))


def test_failed_eval_leaves_no_run_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_script_here("eval.py", f"ckpt_path={tmp_path}/missing.ckpt", capsys=capsys)
    assert code == 2 and "does not exist" in err
    assert list(tmp_path.iterdir()) == []  # no outputs/eval/<date>/, no empty outputs/


def test_mistyped_override_gets_a_hint_next_to_hydras_message(tmp_path, capsys):
    code, _, err = run_script_here(
        "train.py", "model.dmodel=64", f"hydra.run.dir={tmp_path}/run", capsys=capsys
    )
    assert code == 1
    assert "Could not override 'model.dmodel'" in err  # Hydra's own message stays
    assert "did you mean model.d_model?" in err
    assert override_hints("eval", ["eval.num_episode=3", "eval.seed=1"]) == [
        "did you mean eval.num_episodes? (eval.num_episode is not a key of the config)"
    ]


def test_final_lines_keep_the_last_state_of_a_redrawn_line():
    sink = io.StringIO()
    stream = FinalLines(sink)
    stream.write("\rbar  10%\rbar  50%")
    stream.write("\rbar 100%   \nplain line\n\x1b[A\rnested\n\rleft")
    stream.write("\rwithout a newline")
    stream.close()
    assert sink.getvalue() == "bar 100%\nplain line\nnested\nwithout a newline\n"
