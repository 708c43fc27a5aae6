"""Pretrained folders of training runs: `<run>/pretrained_model/`, written when training ends
with the weights the final evaluation measured, and `scripts/export.py format=pretrained`,
which writes one from any checkpoint (and may publish it on the Hub).

    python scripts/export.py format=pretrained ckpt_path=<run or .ckpt> out=<folder>
    python scripts/export.py format=pretrained ckpt_path=<folder> push_to_hub=<user>/<name>

The model card's facts come from the run: its command line (`.hydra/overrides.yaml`), seed and
demonstration set (`.hydra/config.yaml`), and, when the checkpoint holds the weights that
metrics.json measured (the same step), its final success, steps and wall time.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from vla.errors import ConfigError

FOLDER = "pretrained_model"
RATE_KEYS = ("success_rate", "ci95", "num_episodes")


def write_run_pretrained(cfg, module, metrics: dict, out_dir: Path) -> Path:
    """`<run>/pretrained_model/` for a run whose training has ended: the policy as the final
    evaluation measured it, its config and env as the checkpoints store them, and a card."""
    facts = dict(
        command=run_command(out_dir),
        seed=cfg.seed,
        steps=metrics["global_step"],
        wall_s=metrics["timings"]["total_s"],
        dataset=dataset_name(cfg.data, module.env_config),
        weights=weights_note(metrics, ema=(cfg.get("callbacks") or {}).get("ema") is not None),
        success={k: metrics[k] for k in RATE_KEYS} if "success_rate" in metrics else None,
        val_loss=metrics.get("val_loss"),
    )
    configs = module.policy_config, module.env_config  # what its checkpoints store
    return write_card_folder(module.policy, out_dir / FOLDER, facts, *configs)


def weights_note(metrics: dict, ema: bool) -> str:
    """Which weights a run's folder holds, for its card."""
    step = metrics["global_step"]
    note = f"the final step's ({step}; checkpoints/last.ckpt), which the final evaluation measured"
    note += "; their exponential moving average (callbacks.ema)" if ema else ""
    best = metrics.get("best_checkpoint")
    return note + (f"; best by selection: {Path(best).name}" if best else "")


def export_pretrained(cfg) -> Path:
    """scripts/export.py format=pretrained: writes `cfg.out` from `cfg.ckpt_path` (a run, a
    checkpoint, a pretrained folder or Hub id), then pushes it to `cfg.push_to_hub` if set. A
    pretrained folder with no `out` is pushed as it is."""
    from vla.checkpoint import policy_from_checkpoint, read_checkpoint
    from vla.pretrained.folder import read_pretrained
    from vla.pretrained.hub import is_pretrained_source, local_folder, push_folder
    from vla.run_folder import resolve_ckpt_path

    if cfg.get("ckpt_path") is None:
        raise ConfigError("format=pretrained needs ckpt_path=<run, .ckpt or pretrained folder>")
    path = resolve_ckpt_path(cfg.ckpt_path)
    out, repo = cfg.get("out"), cfg.get("push_to_hub")
    if is_pretrained_source(path):
        if out is None and repo is None:
            raise ConfigError(
                f"ckpt_path={cfg.ckpt_path} is a pretrained folder already: give "
                "out=<folder> to copy it, or push_to_hub=<user>/<name> to publish it"
            )
        policy = read_pretrained(path)
        folder = local_folder(path) if out is None else policy.save_pretrained(out)
    elif out is None:
        raise ConfigError("format=pretrained needs out=<folder>: where to write the policy")
    else:
        ckpt = read_checkpoint(path)
        policy = policy_from_checkpoint(ckpt, path)
        facts = run_facts(path, ckpt.get("global_step"), policy.env_config)
        if cfg.get("card_suite"):
            facts["suite"] = suite_levels(cfg.card_suite)
        folder = write_card_folder(policy, out, facts, policy.policy_config, policy.env_config)
    names = ", ".join(sorted(p.name for p in Path(folder).iterdir()))
    print(f"{folder}: pretrained folder ({names})")
    if repo is not None:
        print(f"pushed to {push_folder(folder, repo, private=bool(cfg.get('private')))}")
    return Path(folder)


def write_card_folder(
    policy, out, facts: dict, policy_config: dict, env_config: dict | None
) -> Path:
    """`policy` as a pretrained folder in `out`, with a model card of `facts`."""
    from vla.pretrained.card import model_card
    from vla.pretrained.folder import folder_config, write_pretrained

    vocabulary = policy.tokenizer.get_extra_state()
    card = model_card(folder_config(policy, policy_config, env_config, vocabulary), facts)
    return write_pretrained(policy, out, policy_config, env_config, card)


def run_facts(ckpt: Path, step: int | None, env_config: dict | None) -> dict:
    """What the run holding checkpoint `ckpt` recorded (nothing outside a run folder); its
    final results only if metrics.json measured this checkpoint's step. `env_config`: the
    checkpoint's env, which with the run's data settings names the demonstration set."""
    from vla.run_folder import run_folder_of

    facts = {"steps": step, "weights": f"{ckpt.name} at step {step}"}
    run = run_folder_of(ckpt)
    if run is None:
        return facts
    facts["command"] = run_command(run)
    config_file = run / ".hydra" / "config.yaml"
    if config_file.is_file():
        config = yaml.safe_load(config_file.read_text())
        facts["seed"] = config.get("seed")
        facts["dataset"] = dataset_name(config.get("data") or {}, env_config)
    metrics_file = run / "metrics.json"
    if metrics_file.is_file():
        metrics = json.loads(metrics_file.read_text())
        if metrics.get("global_step") == step:
            facts["wall_s"] = (metrics.get("timings") or {}).get("total_s")
            if metrics.get("success_rate") is not None:
                facts["success"] = {k: metrics[k] for k in RATE_KEYS}
            facts["val_loss"] = metrics.get("val_loss")
    return facts


def run_command(run: Path) -> str | None:
    """The command line that trained `run` (None: not recorded, as for `train(cfg)` called
    from Python)."""
    overrides = run / ".hydra" / "overrides.yaml"
    if not overrides.is_file():
        return None
    return " ".join(["python scripts/train.py", *(yaml.safe_load(overrides.read_text()) or [])])


def dataset_name(data, env_config: dict | None) -> str | None:
    """The demonstration set's key: a LeRobotDataset's folder name, or the cache folder name of
    our own demonstrations (`reach-<hash>` of the env and data settings); None if it cannot be
    told (no env, a value still an interpolation)."""
    if data.get("path"):
        return Path(str(data["path"])).name
    values = [data.get(k) for k in ("num_episodes", "seed", "noise_std")]
    if env_config is None or any(v is None or "${" in str(v) for v in values):
        return None
    from vla.data.dataset import dataset_path

    return dataset_path(".", dict(env_config), *values).name


def suite_levels(path) -> list[dict]:
    """The levels of a suite.json (`scripts/eval.py suite=levels`), or of the one in a folder."""
    path = Path(path)
    path = path / "suite.json" if path.is_dir() else path
    if not path.is_file():
        raise ConfigError(f"card_suite={str(path)!r} is not a suite.json or a folder holding one")
    return json.loads(path.read_text())["levels"]
