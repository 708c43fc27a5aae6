"""The scaling-up paths, exercised on CPU: DDP over gloo, the ranks torchrun and srun give,
the sweep launchers' configs, the GPU recipe (a sweep itself runs in tests/test_study.py)."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import hydra
import pytest
import torch
from hydra import compose, initialize_config_dir
from lightning.fabric.utilities.rank_zero import rank_zero_only as fabric_rank_zero_only
from lightning_utilities.core.rank_zero import rank_zero_only as utils_rank_zero_only
from omegaconf import OmegaConf

from tests.builders import FAST_RUN
from tests.training.test_reliability import _train_in_subprocess, _wait_for_step
from vla.checkpoint import read_checkpoint
from vla.data.dataset import load_demos
from vla.training.train import train

ROOT = Path(__file__).resolve().parents[2]
FAST = [
    *FAST_RUN,
    "~logger",
    "callbacks.best_checkpoint=null",
    "threads=1",
    "seed=3",
]


def _train(args) -> subprocess.CompletedProcess:
    """scripts/train.py with the FAST overrides and `args`."""
    out = subprocess.run(
        [sys.executable, "scripts/train.py", *FAST, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def _ddp_collects_once(tmp_path) -> dict:
    """Two processes from an empty data folder: one collects while the other waits, then
    both load the one copy. Returns the run's last checkpoint."""
    args = ["trainer=ddp_cpu", "data.batch_size=8", f"hydra.run.dir={tmp_path}/ddp"]
    args.append(f"data.dir={tmp_path}/data")  # empty: nothing collected yet
    out = _train(args)
    console = out.stdout + out.stderr
    assert console.count("demonstrations: 60 episodes") == 1, console[-3000:]  # one collector
    (dataset,) = (tmp_path / "data").iterdir()  # one copy, no temporary or stale folders
    assert dataset.name.startswith("reach-") and load_demos(dataset).num_episodes == 60
    assert (tmp_path / "ddp" / "metrics.json").is_file()  # written once, by rank 0
    ckpt = read_checkpoint(tmp_path / "ddp" / "checkpoints" / "last.ckpt")
    assert ckpt["global_step"] == 5
    return ckpt


@pytest.mark.slow
def test_two_process_ddp_collects_once_and_matches_one_process_with_the_same_global_batch(
    tmp_path, compose_cfg
):
    """Lightning's launcher starts the second process inside `fit`."""
    ddp = _ddp_collects_once(tmp_path)
    where = [f"paths.output_dir={tmp_path}/single", f"data.dir={tmp_path}/data"]
    train(compose_cfg("train", [*FAST, "data.batch_size=16", *where]))
    single = read_checkpoint(tmp_path / "single" / "checkpoints" / "last.ckpt")
    assert single["global_step"] == 5
    a, b = single["state_dict"], ddp["state_dict"]
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], torch.Tensor):
            torch.testing.assert_close(a[k], b[k], atol=1e-4, rtol=1e-3, msg=k)
        else:  # the tokenizer's vocabulary
            assert a[k] == b[k]


LAUNCHED = {  # what torchrun and srun tell the second of two processes on one node
    "TorchElasticEnvironment": dict(
        TORCHELASTIC_RUN_ID="1", RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", GROUP_RANK="0",
        LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500",
    ),
    "SLURMEnvironment": dict(
        SLURM_JOB_ID="7", SLURM_JOB_NAME="train", SLURM_NTASKS="2", SLURM_NTASKS_PER_NODE="2",
        SLURM_PROCID="1", SLURM_LOCALID="1", SLURM_NODEID="0", SLURM_NODELIST="node1",
    ),
}  # fmt: skip


@pytest.mark.parametrize("environment", LAUNCHED)
def test_processes_started_by_torchrun_or_srun_take_their_rank_from_the_launcher(
    compose_cfg, tmp_path, monkeypatch, environment
):
    """torchrun and srun start both processes at once; the recipe's trainer takes each one's
    rank from the variables they set, which is what decides the one process that collects
    (the collection itself: the two-process run above, under Lightning's own launcher)."""
    for name, value in LAUNCHED[environment].items():
        monkeypatch.setenv(name, value)
    for rank_zero_only in (fabric_rank_zero_only, utils_rank_zero_only):  # the trainer sets them
        monkeypatch.setattr(rank_zero_only, "rank", getattr(rank_zero_only, "rank", 0), False)
    cfg = compose_cfg("train", ["trainer=ddp_cpu", f"paths.output_dir={tmp_path}"])
    trainer = hydra.utils.instantiate(cfg.trainer, logger=False, enable_checkpointing=False)
    assert type(trainer.strategy.cluster_environment).__name__ == environment
    assert (trainer.global_rank, trainer.local_rank, trainer.world_size) == (1, 1, 2)
    assert not trainer.is_global_zero


@pytest.mark.parametrize(
    "launcher, target",
    [
        ("parallel", "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"),
        ("slurm", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"),
    ],
)
def test_sweep_launchers_compose(launcher, target):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "train",
            [f"hydra/launcher={launcher}", "trainer=ddp", "trainer.num_nodes=2"],
            return_hydra_config=True,
        )
    assert cfg.hydra.launcher._target_ == target
    if launcher == "slurm":
        assert cfg.hydra.launcher.nodes == 2


def test_slurm_jobs_get_sigusr1_before_the_limit_and_can_be_requeued(tmp_path):
    """What submitit writes into the sbatch script for the slurm launcher config: the signal
    Lightning's SLURM environment requeues on. (No cluster here: the script is not run.)"""
    from submitit.slurm.slurm import _make_sbatch_string

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", ["hydra/launcher=slurm"], return_hydra_config=True)
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=False)
    sbatch = _make_sbatch_string(
        command="python -m submitit.core._submit",
        folder=tmp_path,
        signal_delay_s=launcher["signal_delay_s"],
        additional_parameters=launcher["additional_parameters"],
    ).splitlines()
    assert "#SBATCH --signal=USR1@90" in sbatch and "#SBATCH --requeue" in sbatch
    assert len([line for line in sbatch if line.startswith("#SBATCH --signal")]) == 1


@pytest.mark.parametrize("trainer", ["gpu", "ddp", "ddp_cpu"])
def test_scale_up_trainer_configs_compose(compose_cfg, tmp_path, trainer):
    cfg = compose_cfg("train", [f"trainer={trainer}", f"paths.output_dir={tmp_path}"])
    assert cfg.trainer.max_epochs == compose_cfg("train", []).trainer.max_epochs
    if trainer != "ddp_cpu":
        assert cfg.trainer.accelerator == "gpu" and cfg.trainer.precision == "bf16-mixed"
    if trainer.startswith("ddp"):
        assert cfg.trainer.strategy == "ddp"
    hydra.utils.instantiate(
        cfg.trainer, accelerator="cpu", devices=1, strategy="auto", logger=False
    )


@pytest.mark.slow
def test_gpu_recipe_runs_on_cpu_in_bf16_with_compile(compose_cfg, fast_overrides):
    """trainer=gpu with the accelerator swapped to CPU: bf16 autocast and torch.compile."""
    cfg = compose_cfg(
        "train",
        [
            *fast_overrides,
            "trainer=gpu",
            "trainer.accelerator=cpu",
            "+trainer.fast_dev_run=2",
            "~logger",
            "callbacks.best_checkpoint=null",
            "compile=true",
            "eval.num_episodes=2",
            "eval.num_envs=2",
        ],
    )
    metrics = train(cfg)
    assert metrics["global_step"] == 2 and metrics["num_episodes"] == 2
    saved = read_checkpoint(metrics["last_checkpoint"])["state_dict"]
    assert all(torch.isfinite(v).all() for v in saved.values() if isinstance(v, torch.Tensor))


@pytest.mark.slow
def test_sigterm_stops_every_rank_at_one_step_and_rank_zero_saves_and_says_so(tmp_path):
    ddp = ["trainer=ddp_cpu", "threads=1", "data.batch_size=8"]
    proc = _train_in_subprocess(tmp_path, *ddp, "callbacks.last_checkpoint.every_n_train_steps=3")
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    _wait_for_step(ckpt, 3, proc)
    proc.send_signal(signal.SIGTERM)  # the main process; Lightning passes it on to rank 1
    proc.wait(timeout=300)
    output = (tmp_path / "stdout.txt").read_text() + (tmp_path / "stderr.txt").read_text()
    stops = re.findall(r"^stopped at step (\d+): resume with: .+$", output, re.M)
    assert proc.returncode == 143 and len(stops) == 1, output[-3000:]  # rank 0's line only
    assert read_checkpoint(ckpt)["global_step"] == int(stops[0])
