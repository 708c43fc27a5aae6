import json
from pathlib import Path

import hydra
import pytest
import torch
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import vla.data.datamodule
import vla.training.callbacks
import vla.training.outcome
from tests.builders import compose_config, fast_overrides_in
from vla.checkpoint import load_policy, read_checkpoint
from vla.errors import ConfigError, SeedRangeError
from vla.eval.evaluate import evaluate
from vla.eval.rollout import rollout
from vla.training.callbacks import LastCheckpoint
from vla.training.module import build_module
from vla.training.train import train, why_stopped

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
GROUPS = {
    "env": ["reach"],
    "data": ["default"],
    "bc": ["default"],
    "model": ["tiny", "small", "base"],
    "optimizer": ["adamw"],
    "scheduler": ["warmup_cosine"],
    "seeds": ["default"],
    "trainer": ["cpu"],
    "logger": ["tensorboard", "csv", "wandb", "[tensorboard,csv]"],
    "callbacks": ["default"],
    "paths": ["default"],
    "eval": ["default"],
    "debug": ["fast"],
    "experiment": ["chunked", "flow", "objects", "plain", "shared_colours", "suite", "tiny_quick"],
}
ELSEWHERE = {  # options tested in other files
    "env": ["as_trained"],  # eval's: tests/envs/test_families.py
    "trainer": ["ddp", "ddp_cpu", "gpu"],  # tests/training/test_distributed.py
    "suite": ["levels"],  # tests/eval/test_suite.py
    "data": [
        "lerobot",
        "vlm",
        "vlm_control",
        "vlm_env",
    ],  # tests/lerobot/test_datamodule.py, tests/vlm
    "experiment": ["rt2", "vlm"],  # tests/vlm/test_train.py
    "model": ["vlm_small"],  # tests/vlm
    "bc": ["vlm"],  # tests/vlm/test_train.py
    "hydra": ["default"],  # every command composes it
}  # model/head, model/keypoints, model/film, model/objects: tests/models


def test_the_options_tested_are_every_file_of_the_config_groups():
    files = {d.name: sorted(p.stem for p in d.glob("*.yaml")) for d in CONF.iterdir() if d.is_dir()}
    tested = {g: sorted(GROUPS.get(g, []) + ELSEWHERE.get(g, [])) for g in GROUPS | ELSEWHERE}
    tested["logger"].remove("[tensorboard,csv]")  # a list of two files, not one
    assert tested == files


@pytest.mark.parametrize("group, option", [(g, o) for g, opts in GROUPS.items() for o in opts])
def test_every_config_option_composes_and_instantiates(compose_cfg, tmp_path, group, option):
    cfg = compose_cfg("train", [f"{group}={option}", f"paths.output_dir={tmp_path}"])
    policy = hydra.utils.instantiate(cfg.model)
    # the policy is the one the config describes
    assert isinstance(policy.head, hydra.utils.get_class(cfg.model.head._target_))
    assert (policy.d_model, policy.chunk_size, policy.n_action_steps) == (
        cfg.model.d_model,
        cfg.model.chunk_size,
        cfg.model.n_action_steps,
    )
    assert policy.image_encoder.image_size == cfg.env.image_size
    hydra.utils.instantiate(cfg.trainer, logger=False, enable_checkpointing=False)
    for name, cb in cfg.callbacks.items():  # a recipe may turn one off with null
        assert cb is None or isinstance(hydra.utils.instantiate(cb), Callback), name
    hydra.utils.instantiate(cfg.optimizer)([torch.nn.Parameter(torch.zeros(1))])
    module = build_module(cfg, policy)  # its losses fit this policy
    assert module.target_keypoint_weight == cfg.bc.target_keypoint_weight
    assert module.policy_config == OmegaConf.to_container(cfg.model, resolve=True)  # stored


@pytest.mark.parametrize(
    "experiment, changed",
    [
        ("shared_colours", {"env.shared_colours": True, "trainer.max_epochs": 3}),
        ("tiny_quick", {"model.d_model": 64, "model.depth": 2}),
        (
            "suite",
            {
                "env.families": ["name", "attribute", "relation", "sequence"],
                "model.text_encoder.depth": 1,
                "bc.target_position_weight": 1.0,
                "trainer.max_epochs": 3,
                "callbacks.early_stopping": None,
            },
        ),
    ],
)
def test_experiments_change_only_what_they_name(compose_cfg, tmp_path, experiment, changed):
    base = compose_cfg("train", [f"paths.output_dir={tmp_path}"])
    cfg = compose_cfg("train", [f"experiment={experiment}", f"paths.output_dir={tmp_path}"])
    for key, value in changed.items():
        assert OmegaConf.select(cfg, key) == value, key
        assert OmegaConf.select(base, key) != value, key
    groups = ("data", "optimizer", "scheduler", "seeds", "eval")
    assert all(cfg[g] == base[g] for g in groups)  # the rest of the recipe is the default's
    assert cfg.model.image_size == 48


def test_one_callback_writes_last_ckpt_and_seed_ranges_are_kept(compose_cfg, tmp_path):
    cfg = compose_cfg("train", [f"paths.output_dir={tmp_path}"])
    callbacks = [hydra.utils.instantiate(c) for c in cfg.callbacks.values()]
    writers = [c for c in callbacks if isinstance(c, LastCheckpoint)]
    assert len(writers) == 1 and writers[0].path == f"{tmp_path}/checkpoints/last.ckpt"
    assert not any(isinstance(c, ModelCheckpoint) and c.save_last for c in callbacks)
    assert cfg.eval.seed == 1_000_000_000  # test episodes
    assert cfg.callbacks.rollout_eval.seed == 2_000_000_000  # checkpoint-selection episodes


def test_command_line_override_changes_the_model(compose_cfg, tmp_path):
    def count(overrides):
        cfg = compose_cfg("train", [f"paths.output_dir={tmp_path}", *overrides])
        return sum(p.numel() for p in hydra.utils.instantiate(cfg.model).parameters())

    assert count(["model.depth=1"]) < count([]) < count(["model.d_model=192", "model.n_heads=4"])


@pytest.mark.slow
def test_fast_dev_run_builds_the_data_once(compose_cfg, fast_overrides, monkeypatch):
    calls = []
    real = vla.data.datamodule.ensure_demos
    monkeypatch.setattr(
        vla.data.datamodule, "ensure_demos", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    cfg = compose_cfg(
        "train",
        [
            *fast_overrides,
            "+trainer.fast_dev_run=true",
            "~logger",
            "callbacks.best_checkpoint=null",
        ],
    )
    metrics = train(cfg)
    assert len(calls) == 1  # not again for the statistics, nor for Lightning's prepare_data
    assert metrics["global_step"] == 1 and metrics["num_episodes"] == cfg.eval.num_episodes == 8
    assert metrics["success_rate"] * 8 == round(metrics["success_rate"] * 8)  # k of 8 episodes


# the tests that read it run in one test process, so it trains once (pytest --dist loadgroup)
ONE_RUN = pytest.mark.xdist_group("trained_run")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A fast run; `metrics["rollout_seeds"]` lists (caller, first seed, episodes) of its
    rollouts, recorded around the real rollout function, and `metrics["rollout_weights"]`
    the policy's weights each of them ran. Shared: a test must not change its folder."""
    seeds, weights = [], []
    with pytest.MonkeyPatch.context() as monkeypatch:
        for module in (vla.training.outcome, vla.training.callbacks):
            real = module.rollout

            def recorded(policy, env, n, seed, *a, _real=real, _who=module.__name__, **k):
                seeds.append((_who.rsplit(".", 1)[1], seed, n))
                state = policy.state_dict()
                weights.append({k: v.clone() for k, v in state.items() if torch.is_tensor(v)})
                return _real(policy, env, n, seed, *a, **k)

            monkeypatch.setattr(module, "rollout", recorded)
        cfg = compose_config("train", fast_overrides_in(tmp_path_factory.mktemp("trained")))
        metrics = train(cfg)
    extra = {"rollout_seeds": seeds, "rollout_weights": weights}
    return Path(cfg.paths.output_dir), metrics | extra, cfg


@pytest.mark.slow
@ONE_RUN
def test_end_to_end_train_writes_checkpoint_tensorboard_and_metrics(trained_run):
    run, metrics, cfg = trained_run
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert list((run / "checkpoints").glob("best-*.ckpt"))
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["success_rate"] == metrics["success_rate"]
    assert saved["num_episodes"] == cfg.eval.num_episodes
    selection = cfg.callbacks.rollout_eval  # picks the best checkpoint on its own episodes
    assert metrics["rollout_seeds"] == [
        ("callbacks", 2_000_000_000, selection.num_episodes),  # after the one epoch
        ("outcome", 1_000_000_000, cfg.eval.num_episodes),  # the final test
    ]
    # the reported rate is the final weights' on the test episodes: rolling the saved
    # checkpoint out again on those seeds gives the same episodes and the same outcome
    policy, env_kwargs = load_policy(run / "checkpoints" / "last.ckpt")
    again = rollout(
        policy, env_kwargs, cfg.eval.num_episodes, cfg.eval.seed, num_envs=cfg.eval.num_envs
    ).metrics()
    assert (again["success_rate"], again["mean_steps"]) == (
        saved["success_rate"],
        saved["mean_steps"],
    )
    timings = saved["timings"]  # the parts add up to the whole
    parts = [timings["collect_s"], timings["train_s"], timings["eval_s"]]
    assert min(parts) > 0 and sum(parts) == pytest.approx(timings["total_s"], abs=0.05)
    events = EventAccumulator(str(run / "tensorboard")).Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "val/loss", "val/action_mse", "eval/success_rate"} <= tags
    assert any(t.startswith("lr-") for t in tags)
    images = set(events.Tags()["images"])
    assert "rollout/episode_0" in images and "attention/episode_0" in images
    losses = [e.value for e in events.Scalars("train/loss")]
    assert all(torch.isfinite(torch.tensor(losses)))


@pytest.mark.slow
@ONE_RUN
def test_rollouts_and_checkpoints_use_the_weight_average(trained_run):
    run, metrics, _ = trained_run
    ckpt = read_checkpoint(run / "checkpoints" / "last.ckpt")  # written at the last step
    average, raw = ckpt["state_dict"], ckpt["current_model_state"]  # raw: to resume from
    tensors = [k for k, v in raw.items() if torch.is_tensor(v)]
    assert any(not torch.equal(average[k], raw[k]) for k in tensors)  # 5 steps apart
    during, final = metrics["rollout_weights"]  # selection rollouts at step 5, then the test
    for ran in (during, final):
        assert all(torch.equal(w, average[f"policy.{k}"]) for k, w in ran.items())


@pytest.mark.slow
@ONE_RUN
def test_checkpoint_rebuilds_the_policy_alone(trained_run):
    run, _, _ = trained_run
    ckpt = read_checkpoint(run / "checkpoints" / "last.ckpt")
    assert ckpt["vla"]["policy_config"]["_target_"].startswith("vla.")
    policy, env_kwargs = load_policy(run / "checkpoints" / "last.ckpt")
    assert env_kwargs["image_size"] == 32
    assert not policy.training


@pytest.mark.slow
@ONE_RUN
def test_eval_on_the_checkpoint(trained_run, compose_cfg, tmp_path):
    run, _, _ = trained_run
    cfg = compose_cfg(
        "eval",
        [
            f"ckpt_path={run}/checkpoints/last.ckpt",
            "eval.num_episodes=6",
            "eval.record=2",
            f"paths.output_dir={tmp_path}/eval",
        ],
    )
    with pytest.raises(SeedRangeError, match="eval.seed=0 with 6 episodes uses seeds 0..5"):
        evaluate(
            compose_cfg("eval", [f"ckpt_path={run}/x.ckpt", "eval.num_episodes=6", "eval.seed=0"])
        )
    metrics = evaluate(cfg)
    saved = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert saved["num_episodes"] == 6 and saved["success_rate"] == metrics["success_rate"]
    assert {"mean_steps", "success_by_colour", "success_by_shape"} <= set(saved)
    gifs = list((tmp_path / "eval").glob("*.gif"))
    assert len(gifs) == 2 and all(g.stat().st_size > 0 for g in gifs)


@pytest.mark.slow
@ONE_RUN
def test_resume_continues_from_the_saved_step(trained_run, compose_cfg, fast_overrides, tmp_path):
    run, _, first_cfg = trained_run
    ckpt = run / "checkpoints" / "last.ckpt"
    saved_step = read_checkpoint(ckpt)["global_step"]
    assert saved_step == 5
    cfg = compose_cfg(
        "train",
        [
            *fast_overrides[:-2],
            f"paths.output_dir={tmp_path}/resumed",
            f"data.dir={run.parent}/data",
            f"ckpt_path={ckpt}",
            "trainer.max_epochs=2",
        ],
    )
    metrics = train(cfg)
    assert metrics["global_step"] == saved_step + 5


@pytest.mark.slow
def test_rollouts_run_every_n_steps_and_make_the_learning_curve(compose_cfg, fast_overrides):
    # 2 epochs of 5 steps, validation every 3 steps (counted across epochs): steps 3, 6, 9;
    # rollouts at every 2nd validation, and at the first so a best checkpoint can be chosen
    cfg = compose_cfg(
        "train",
        [
            *fast_overrides,
            "~logger",
            "trainer.max_epochs=2",
            "trainer.val_check_interval=3",
            "callbacks.rollout_eval.every_n_validations=2",
        ],
    )
    curve = train(cfg)["curve"]
    assert [p["step"] for p in curve] == [3, 6, 10]
    assert [p.get("final", False) for p in curve] == [False, False, True]
    seconds = [p["seconds"] for p in curve]
    assert 0 < seconds[0] < seconds[1] < seconds[2]


@pytest.mark.slow
def test_early_stopping_ends_the_run_and_the_test_episodes_still_run(
    compose_cfg, fast_overrides, monkeypatch
):
    finals = []
    real = vla.training.outcome.rollout
    monkeypatch.setattr(
        vla.training.outcome,
        "rollout",
        lambda p, e, n, seed, *a, **k: finals.append((seed, n)) or real(p, e, n, seed, *a, **k),
    )
    # 2 epochs of 5 steps planned, rollouts every 2 steps; any success rate is above -1
    overrides = [*fast_overrides, "~logger", "trainer.max_epochs=2", "trainer.val_check_interval=2"]
    cfg = compose_cfg("train", [*overrides, "callbacks.early_stopping.stopping_threshold=-1"])
    metrics = train(cfg)
    assert metrics["global_step"] == 2 and [p["step"] for p in metrics["curve"]] == [2, 2]
    assert metrics["stopped"].startswith("training stopped at step 2: selection success")
    assert finals == [(cfg.eval.seed, cfg.eval.num_episodes)]


@pytest.mark.slow
def test_a_rate_above_the_threshold_is_confirmed_on_fresh_selection_episodes(
    compose_cfg, fast_overrides, monkeypatch
):
    """The confirmation round runs the next block of selection seeds, and the rate logged (and
    stopped on) is the pooled one."""
    calls = []
    real = vla.training.callbacks.rollout

    def recorded(p, e, n, seed, *a, **k):
        result = real(p, e, n, seed, *a, **k)
        calls.append((seed, n, int(result.success.sum())))
        return result

    monkeypatch.setattr(vla.training.callbacks, "rollout", recorded)
    confirm = [
        "callbacks.rollout_eval.confirm_above=-1",
        "callbacks.rollout_eval.confirm_episodes=3",
    ]
    cfg = compose_cfg("train", [*fast_overrides, "~logger", *confirm])
    metrics = train(cfg)
    seed = cfg.callbacks.rollout_eval.seed
    assert [c[:2] for c in calls] == [(seed, 4), (seed + 4, 3)]
    (point, _final) = metrics["curve"]
    assert point["num_episodes"] == 7
    assert point["success_rate"] == pytest.approx(sum(c[2] for c in calls) / 7)
    with pytest.raises(ConfigError, match="confirm_episodes=0 must be >= 1"):
        train(compose_cfg("train", [*fast_overrides, "callbacks.rollout_eval.confirm_episodes=0"]))


def _stopper_after(compose_cfg, rates: list[float]) -> tuple[EarlyStopping, Trainer]:
    """The recipe's early stopping (stop above 98.5%, or after 6 evaluations without a new
    best) shown `rates` as the selection rollouts' results, one validation each."""
    stopper = hydra.utils.instantiate(compose_cfg("train", []).callbacks.early_stopping)
    trainer = Trainer(max_epochs=2, logger=False, enable_checkpointing=False)
    trainer.state.fn = TrainerFn.FITTING
    for rate in rates:
        trainer.callback_metrics[stopper.monitor] = torch.tensor(rate)
        stopper.on_validation_end(trainer, None)
    return stopper, trainer


def test_the_stopping_line_says_why_and_names_the_setting(compose_cfg):
    at = "training stopped at step 0"
    stopper, trainer = _stopper_after(compose_cfg, [0.5, 0.99])
    assert trainer.should_stop
    assert why_stopped([stopper], trainer) == (
        f"{at}: selection success 99.0% > 98.5% (callbacks.early_stopping.stopping_threshold)"
    )
    stopper, trainer = _stopper_after(compose_cfg, [0.5, 0.75, *[0.7] * 6])
    assert trainer.should_stop
    assert why_stopped([stopper], trainer) == (
        f"{at}: no better selection success in 6 evaluations (best 75.0%; "
        "callbacks.early_stopping.patience)"
    )
    stopper, trainer = _stopper_after(compose_cfg, [0.5, 0.75, *[0.7] * 5])
    assert not trainer.should_stop
    schedule = f"{at}: the end of the schedule (trainer.max_epochs=2)"
    assert why_stopped([stopper], trainer) == why_stopped([], trainer) == schedule
    steps = Trainer(max_steps=7, logger=False, enable_checkpointing=False)
    assert why_stopped([], steps) == f"{at}: the end of the schedule (trainer.max_steps=7)"


def test_each_shared_value_is_stated_once_and_followed(compose_cfg, tmp_path):
    out = f"paths.output_dir={tmp_path}"
    train_cfg, eval_cfg = compose_cfg("train", [out]), compose_cfg("eval", ["ckpt_path=x", out])
    for name in ("benchmark", "collect"):  # every command sees the recipe's 48 px images
        assert compose_cfg(name, [out]).env.image_size == train_cfg.env.image_size == 48
    shared = ("num_episodes", "seed", "num_envs", "n_action_steps", "temporal_ensemble_coeff")
    assert {k: train_cfg.eval[k] for k in shared} == {k: eval_cfg.eval[k] for k in shared}
    cfg = compose_cfg("train", ["eval.num_envs=7", out])  # the training rollouts follow
    assert cfg.callbacks.rollout_eval.num_envs == 7
    cfg = compose_cfg("train", ["experiment=flow", "model.head.flow_steps=20", out])
    assert cfg.model.head.flow_steps == 20 and cfg.model.chunk_size == 4
