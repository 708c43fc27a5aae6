"""A run stopped by a signal: its one line, its exit status, where it resumes from."""

import copy
import logging
import os
import signal
import sys
import threading

import pytest
import torch
import yaml
from lightning.pytorch.utilities.exceptions import SIGTERMException

import vla.training.callbacks
from tests.builders import compose_config
from vla.checkpoint import AtomicCheckpointIO, read_checkpoint
from vla.cli import run_cli
from vla.console import LIGHTNING_NOISE, DropMessages
from vla.errors import TrainingInterrupted
from vla.training.resume import requeued_checkpoint
from vla.training.stop_at_step import StoppedAtStep
from vla.training.stopping import Terminated, exit_status, signal_of, stop_message
from vla.training.train import train

RESUME = "resume with: python scripts/train.py ckpt_path="
MAIN_THREAD = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)


def _run_with_checkpoints(tmp_path, tiny_ckpt, steps: dict):
    """A run folder whose checkpoints/ holds a copy of tiny_ckpt at each {name: step}."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["model=tiny"]))
    ckpt = read_checkpoint(tiny_ckpt)
    for name, step in steps.items():
        AtomicCheckpointIO().save_checkpoint(
            ckpt | {"global_step": step}, run / "checkpoints" / name
        )
    return run, run / "checkpoints"


def test_the_line_says_how_to_resume_from_the_step_saved_now(tmp_path, tiny_ckpt):
    run, folder = _run_with_checkpoints(tmp_path, tiny_ckpt, {"last.ckpt": 353})
    message = stop_message(353, folder / "last.ckpt", folder)
    assert message == f"stopped at step 353: {RESUME}{run.resolve()}"


def test_an_installed_run_is_told_the_installed_command(tmp_path, tiny_ckpt, monkeypatch):
    run, folder = _run_with_checkpoints(tmp_path, tiny_ckpt, {"last.ckpt": 353})
    monkeypatch.setattr("sys.argv", ["/venv/bin/vla-train", "seed=1"])
    message = stop_message(353, folder / "last.ckpt", folder)
    assert message == f"stopped at step 353: resume with: vla-train ckpt_path={run.resolve()}"


def test_without_a_save_the_line_names_the_newest_checkpoint_that_loads(tmp_path, tiny_ckpt):
    run, folder = _run_with_checkpoints(
        tmp_path, tiny_ckpt, {"last.ckpt": 200, "best-step00100.ckpt": 100}
    )
    (folder / "best-step00300.ckpt").write_bytes(b"cut short by a full disk")  # does not load
    failed = stop_message(353, None, folder, "[Errno 28] No space left on device")
    assert failed == (
        "stopped at step 353: saving step 353 failed ([Errno 28] No space left on device); "
        f"the newest checkpoint is {folder / 'last.ckpt'} (step 200): {RESUME}{run.resolve()}"
    )
    # a best checkpoint ahead of last.ckpt is named itself (the run folder means last.ckpt)
    AtomicCheckpointIO().save_checkpoint(
        read_checkpoint(tiny_ckpt) | {"global_step": 300}, folder / "best-step00300.ckpt"
    )
    newer = stop_message(353, None, folder)
    assert newer.startswith("stopped at step 353: step 353 was not saved; the newest checkpoint")
    assert newer.endswith(f"(step 300): {RESUME}{folder / 'best-step00300.ckpt'}")
    empty = stop_message(0, None, tmp_path / "nowhere")
    assert (
        empty == "stopped at step 0: step 0 was not saved and there is no checkpoint to resume from"
    )


def _stop_after(interrupt: BaseException) -> SystemExit:
    """The SystemExit Lightning raises after it has handled a KeyboardInterrupt."""
    try:
        try:
            raise interrupt
        except KeyboardInterrupt:
            sys.exit(1)
    except SystemExit as e:
        return e


def test_each_signal_gets_its_exit_status():
    assert exit_status(signal_of(SIGTERMException())) == 143  # Lightning's flag path
    assert exit_status(signal_of(_stop_after(Terminated(signal.SIGTERM)))) == 143
    assert exit_status(signal_of(_stop_after(KeyboardInterrupt()))) == 130  # Ctrl-C
    assert exit_status(signal_of(StoppedAtStep(signal.SIGTERM))) == 143  # noted, at a step
    assert exit_status(signal_of(StoppedAtStep(signal.SIGINT))) == 130


def _raise(error):
    def fn(cfg):
        raise error

    return fn


def test_a_stop_is_one_plain_line_on_rank_zero_and_status_128_plus_signal(capsys):
    message = f"stopped at step 7: {RESUME}/runs/x"
    with pytest.raises(SystemExit) as info:
        run_cli(_raise(TrainingInterrupted(message, signal.SIGTERM)), cfg=None)
    assert info.value.code == 143 and capsys.readouterr().err == message + "\n"
    with pytest.raises(SystemExit) as info:  # another rank of a DDP run
        run_cli(_raise(TrainingInterrupted(message, signal.SIGINT, rank_zero=False)), cfg=None)
    assert info.value.code == 130 and capsys.readouterr().err == ""


@MAIN_THREAD
def test_sigterm_outside_training_stops_with_one_line_and_143(capsys):
    def collecting(cfg):  # a SIGTERM while demonstrations are collected, say
        signal.raise_signal(signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the command")

    def callers_own(signum, frame):
        raise AssertionError("the command's handler was not in place")

    previous = signal.signal(signal.SIGTERM, callers_own)
    try:
        with pytest.raises(SystemExit) as info:
            run_cli(collecting, cfg=None)
        assert signal.getsignal(signal.SIGTERM) is callers_own  # restored when it ends
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert info.value.code == 143 and capsys.readouterr().err == "stopped (SIGTERM)\n"


def _same(a, b) -> bool:
    """Equal nested dicts of tensors and values."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


def _signal_in_save(monkeypatch, signum, at_step: int, presses: int = 1):
    """Sends `signum` (`presses` times) from inside the first checkpoint save at `at_step`;
    returns (how that save ended: "whole" or "cut", the trained weights it was given, the
    rollouts started after the signal), filled in as the run goes."""
    real_save, outcomes, first, rollouts_after = AtomicCheckpointIO.save_checkpoint, [], {}, []

    def save_with_signal(self, checkpoint, path, storage_options=None):
        if checkpoint["global_step"] == at_step and not outcomes:
            first.update(copy.deepcopy(checkpoint["current_model_state"]))  # the trained weights
            try:
                for _ in range(presses):
                    os.kill(os.getpid(), signum)  # handled here, inside the save
                real_save(self, checkpoint, path, storage_options)
            except KeyboardInterrupt:
                outcomes.append("cut")
                raise
            outcomes.append("whole")
            return
        real_save(self, checkpoint, path, storage_options)

    real_rollout = vla.training.callbacks.rollout

    def rollout_counted(*args, **kwargs):  # the real rollouts, counted once the signal is sent
        rollouts_after.extend([1] if outcomes else [])
        return real_rollout(*args, **kwargs)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", save_with_signal)
    monkeypatch.setattr(vla.training.callbacks, "rollout", rollout_counted)
    return outcomes, first, rollouts_after


@MAIN_THREAD
@pytest.mark.parametrize(
    "signum, at_step, presses, every, saves, evaluates",
    [
        (signal.SIGINT, 2, 1, 2, "whole", False),  # noted: the save ends, the next step not
        (signal.SIGINT, 2, 2, 2, "cut", False),  # the second Ctrl-C raises at once, in the save
        pytest.param(signal.SIGTERM, 4, 1, 2, "whole", False, marks=pytest.mark.slow),
        # the best checkpoint's save in the rollout evaluation after the last step: acted on
        # at the epoch's end, before the averaged weights replace the trained ones
        pytest.param(signal.SIGINT, 5, 1, 2, "whole", False, marks=pytest.mark.slow),
        # the periodic save at step 5, before that step's rollout evaluation: it runs to its
        # end, with the trained weights back in place after it
        pytest.param(signal.SIGTERM, 5, 1, 5, "whole", True, marks=pytest.mark.slow),
    ],
)
def test_a_signal_stops_between_steps_and_saves_the_step_reached(
    fast_overrides, monkeypatch, capfd, signum, at_step, presses, every, saves, evaluates
):
    """debug=fast trains 5 steps (a rollout evaluation after step 5) with weights averaged."""
    outcomes, first, rollouts_after = _signal_in_save(monkeypatch, signum, at_step, presses)
    every_n = f"callbacks.last_checkpoint.every_n_train_steps={every}"
    cfg = compose_config("train", [*fast_overrides, every_n])
    with pytest.raises(TrainingInterrupted) as stop:
        train(cfg)
    assert outcomes == [saves] and stop.value.signum == signum
    assert bool(rollouts_after) == evaluates
    assert str(stop.value).startswith(f"stopped at step {at_step}: {RESUME}")
    last = read_checkpoint(f"{cfg.paths.output_dir}/checkpoints/last.ckpt")
    assert last["global_step"] == at_step
    assert _same(last["current_model_state"], first)  # not the averaged ones (ema callback)
    said = "Ctrl-C: stopping after this step (Ctrl-C again to stop now)"
    assert (said in capfd.readouterr().err) == (signum == signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@MAIN_THREAD
@pytest.mark.slow
def test_a_signal_before_a_rollout_evaluation_lets_it_run_and_the_resumed_run_keeps_it(
    fast_overrides, monkeypatch
):
    """10 steps, a rollout evaluation after steps 5 and 10; SIGTERM in step 5's save: the
    evaluation of step 5 runs, the run stops at the end of step 6, and the resumed run
    evaluates after step 10 as the run would have without the stop."""
    ten = [*fast_overrides, "trainer.limit_train_batches=10", "eval.num_episodes=2"]
    _signal_in_save(monkeypatch, signal.SIGTERM, at_step=5)
    every_5 = "callbacks.last_checkpoint.every_n_train_steps=5"
    cfg = compose_config("train", [*ten, every_5])
    with pytest.raises(TrainingInterrupted, match="stopped at step 6"):
        train(cfg)
    monkeypatch.undo()
    resumed = train(compose_config("train", [*ten, every_5, f"ckpt_path={cfg.paths.output_dir}"]))
    assert [point["step"] for point in resumed["curve"]] == [5, 10, 10]  # the last: the final


def test_lightnings_lines_about_a_stop_are_dropped():
    noise = DropMessages(LIGHTNING_NOISE)
    for message, kept in [
        ("\nDetected KeyboardInterrupt, attempting graceful shutdown ...", False),
        ("[rank: 0] Received SIGTERM: 15", False),
        ("[rank: 1] Bypassing SIGTERM: 15", False),
        ("stopped at step 3: resume with: python scripts/train.py ckpt_path=x", True),
    ]:
        record = logging.LogRecord("lightning", logging.INFO, __file__, 0, message, None, None)
        assert noise.filter(record) == kept, message


def test_a_requeued_slurm_job_resumes_its_own_last_checkpoint(
    compose_cfg, tmp_path, tiny_ckpt, monkeypatch
):
    cfg = compose_cfg("train", ["model=tiny", f"paths.output_dir={tmp_path}/run"])
    _run_with_checkpoints(tmp_path, tiny_ckpt, {"last.ckpt": 400})
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert requeued_checkpoint(cfg) is None  # not requeued: a run folder is not resumed unasked
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")  # SLURM's first start
    assert requeued_checkpoint(cfg) is None
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert requeued_checkpoint(cfg) == tmp_path / "run" / "checkpoints" / "last.ckpt"
    cfg.ckpt_path = str(tiny_ckpt)  # the user's choice wins
    assert requeued_checkpoint(cfg) is None
    fresh = compose_cfg("train", ["model=tiny", f"paths.output_dir={tmp_path}/fresh"])
    assert requeued_checkpoint(fresh) is None  # requeued before its first checkpoint
