"""The learning-speed study: curve arithmetic on known values, and a sweep of two seeds
summarised by the script end to end."""

import json
from pathlib import Path

import pytest
import torch
import yaml

from tests.builders import run_script_here
from vla.checkpoint import load_policy, read_checkpoint
from vla.data.seeds import TEST_SEED_START
from vla.eval.rollout import rollout
from vla.eval.stats import rate_summary
from vla.study import summarize
from vla.study.report import group_rows, markdown
from vla.study.runs import Run, find_runs, recipe_of, time_to

ROOT = Path(__file__).resolve().parents[1]


def make_run(recipe, seed, seconds, success, final):
    steps = list(range(len(seconds)))
    return Run(Path(f"/runs/{recipe}{seed}"), recipe, seed, steps, seconds, success, final, 300.0)


def test_time_to_is_the_first_time_the_curve_reaches_the_threshold():
    seconds, success = [10.0, 20.0, 30.0, 40.0], [0.3, 0.96, 0.9, 0.99]
    assert time_to(seconds, success, 0.95) == 20.0  # a later dip does not move it
    assert time_to(seconds, success, 0.98) == 40.0
    assert time_to(seconds, success, 0.995) is None


def test_recipe_leaves_out_seed_and_output_settings():
    a = recipe_of(["seed=3", "model/head=continuous", "hydra.run.dir=x", "threads=1", "data.dir=d"])
    b = recipe_of(["model/head=continuous", "seed=4"])
    assert a == b == "model/head=continuous"
    assert recipe_of(["seed=1"]) == "(defaults)"
    assert recipe_of(["seed=1", "seeds.selection=2000000100"]) == "seeds.selection=2000000100"


def write_run(folder: Path, config: dict, overrides: list[str]) -> None:
    """A finished run folder as train.py leaves it: metrics.json and Hydra's record."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"task_name": "train", **config}))
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    curve = [dict(step=5, seconds=10.0, success_rate=0.5, final=True)]
    metrics = dict(curve=curve, success_rate=0.5, num_episodes=20, timings=dict(total_s=12.0))
    (folder / "metrics.json").write_text(json.dumps(metrics))


def test_runs_are_grouped_by_their_configs_not_by_override_strings(tmp_path):
    def config(seed, selection=2_000_000_000, out="x", heads=4):
        return {
            "seed": seed,
            "threads": 1,
            "paths": {"output_dir": out, "data_dir": f"{out}/data"},
            "data": {"dir": f"{out}/data", "batch_size": 32},
            "seeds": {"test": 1_000_000_000, "selection": selection},
            "callbacks": {"rollout_eval": {"seed": "${seeds.selection}"}},
            "model": {"n_heads": heads},
        }

    write_run(tmp_path / "0", config(0, out="a"), ["seed=0", "data.dir=a/data"])
    write_run(tmp_path / "1", config(1, out="b"), ["seed=1", "threads=1"])  # the same recipe
    write_run(tmp_path / "2", config(0, selection=2_000_000_100), ["seed=0", "seeds.selection=2000000100"])  # fmt: skip
    write_run(tmp_path / "3", config(0, heads=2), ["seed=0"])  # a conf file edited in between
    write_run(tmp_path / "4", config(1, heads=2), ["seed=1"])
    runs = {r.path.name: r for r in find_runs(tmp_path)}
    assert runs["0"].recipe == runs["1"].recipe == "(defaults) [model.n_heads=4]"
    assert runs["2"].recipe == "seeds.selection=2000000100"
    assert runs["3"].recipe == runs["4"].recipe == "(defaults) [model.n_heads=2]"
    rows = group_rows(list(runs.values()))
    assert [(r["recipe"], r["seeds"]) for r in rows] == [
        ("(defaults) [model.n_heads=2]", [0, 1]),
        ("(defaults) [model.n_heads=4]", [0, 1]),
        ("seeds.selection=2000000100", [0]),
    ]


def test_group_rows_report_the_worst_and_the_median_seed():
    runs = [
        make_run("a", 0, [60, 120, 180], [0.5, 0.96, 1.0], final=1.0),
        make_run("a", 1, [60, 120, 180], [0.3, 0.5, 0.95], final=0.95),
        make_run("a", 2, [60, 120, 180], [0.9, 0.97, 0.99], final=0.99),
        make_run("b", 0, [60, 120], [0.2, 0.4], final=0.4),
    ]
    a, b = group_rows(runs)
    assert a["recipe"] == "a" and a["seeds"] == [0, 1, 2]
    assert a["final_worst"] == 0.95 and a["final_median"] == 0.99
    assert a["time_to_95%_worst"] == 180 and a["time_to_95%_median"] == 120
    assert a["time_to_98%_worst"] is None  # seed 1 never got there
    assert a["time_to_98%_median"] == 180  # median over the seeds that did
    assert b["time_to_90%_median"] is None
    table = markdown(runs)
    assert "| `a` | 0, 1, 2 | 95.0% / 99.0% |" in table
    assert "| `a` | 1 | 95.0% | 3.0 min (2) | 3.0 min (2) | never |" in table  # (the step)


@pytest.mark.slow
def test_a_sweep_runs_each_seed_as_its_own_job_and_the_study_summarises_it(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    common = ["debug=fast", "model=tiny", "env.image_size=32", "~logger", "threads=1"]
    code, _, err = run_script_here(
        "train.py",
        "-m",
        *common,
        "seed=1,2",
        f"hydra.sweep.dir={sweep}",
        f"data.dir={tmp_path}/data",
        capsys=capsys,
    )
    assert code == 0, err[-3000:]
    runs = [sweep / str(i) for i in (0, 1)]
    # each job its own seed, checkpoint and metrics
    for run, seed in zip(runs, (1, 2), strict=True):
        assert f"seed={seed}" in (run / ".hydra" / "overrides.yaml").read_text()
    a, b = [read_checkpoint(r / "checkpoints" / "last.ckpt")["state_dict"] for r in runs]
    assert any(not torch.equal(a[k], b[k]) for k in a if isinstance(a[k], torch.Tensor))
    for run in runs:  # each job's metrics are its own checkpoint's, on the test episodes
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["global_step"] == 5 and metrics["num_episodes"] == 8
        policy, env_kwargs = load_policy(run / "checkpoints" / "last.ckpt")
        again = rollout(policy, env_kwargs, 8, TEST_SEED_START, num_envs=8).metrics()
        assert again["success_rate"] == metrics["success_rate"]

    code, out, err = run_script_here("study.py", f"runs={sweep}", capsys=capsys)
    assert code == 0, err[-3000:]
    assert "debug=fast env.image_size=32 model=tiny ~logger" in out  # one recipe (threads: no)
    summary = json.loads((sweep / "study.json").read_text())
    (recipe,) = summary["recipes"]
    assert recipe["seeds"] == [1, 2]
    for run in summary["runs"]:
        curve = run["curve"]
        assert curve["steps"][-1] == 5 and curve["seconds"] == sorted(curve["seconds"])
        assert run["final_success"] == curve["success"][-1]
    assert (sweep / "study.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (sweep / "study.md").read_text().startswith("| recipe |")


def write_suite(
    folder: Path, ckpt_path: Path, rates: dict[str, float], n: int = 200, words=None
) -> None:
    """An eval.py suite folder: its Hydra record (an eval config) and suite.json; `words`:
    the relation level's success by relation word."""
    (folder / ".hydra").mkdir(parents=True)
    config = {"task_name": "eval", "ckpt_path": str(ckpt_path)}
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    levels = [
        dict(
            level=k,
            kind="in-distribution",
            success_rate=v,
            ci95=[v - 0.1, v],
            num_episodes=n,
            mean_steps=9.0,
            success_by_relation=(words or {}) if k == "relation" else {},
        )  # fmt: skip
        for k, v in rates.items()
    ]
    (folder / "suite.json").write_text(json.dumps(dict(levels=levels)))
    (folder / "metrics.json").write_text(json.dumps(dict(success_rate=0.0)))  # not a training run


def test_suites_join_their_training_runs_and_report_worst_and_median_seeds(tmp_path):
    for seed, (rate, nearest) in enumerate([(0.9, 18), (0.5, 5), (0.7, 11)]):
        write_run(tmp_path / f"run{seed}", {"seed": seed}, [f"seed={seed}"])
        ckpt = tmp_path / f"run{seed}" / ("checkpoints/last.ckpt" if seed else "")
        words = {"nearest": rate_summary(nearest, 20), "leftmost": rate_summary(20, 20)}
        rates = {"name": 1.0, "relation": rate}
        write_suite(tmp_path / f"run{seed}" / "suite", ckpt, rates, words=words)
    summary = summarize(tmp_path)
    assert len(summary["runs"]) == 3  # the suite folders are not training runs
    name, relation = summary["suites"]
    assert (name["level"], name["worst"], name["median"]) == ("name", 1.0, 1.0)
    assert (relation["level"], relation["worst"], relation["median"]) == ("relation", 0.5, 0.7)
    table = (tmp_path / "suites.md").read_text()
    assert (
        "| relation | in-distribution | `(defaults)` | 70.0% / 50.0% | 0: 90.0% [80.0, 90.0] of 200;"
        in table
    )
    leftmost, nearest = summary["suites_by_relation"]
    assert (nearest["relation"], nearest["worst"], nearest["median"]) == ("nearest", 0.25, 0.55)
    assert leftmost["relation"] == "leftmost" and leftmost["worst"] == 1.0
    # each seed's rate by relation word with its Wilson interval: 18 of 20 is [69.9, 97.2]
    assert (
        "| relation | nearest | `(defaults)` | 55.0% / 25.0% | 0: 90.0% [69.9, 97.2] of 20; "
        "1: 25.0% [11.2, 46.9] of 20; 2: 55.0% [34.2, 74.2] of 20 |" in table
    )
    # the study's own table gives each final rate its interval and episodes
    assert "| `(defaults)` | 0 | 50.0% [" in (tmp_path / "study.md").read_text()


def test_a_missing_runs_folder_is_one_line_and_leaves_no_folder(tmp_path, capsys):
    code, _, err = run_script_here("study.py", f"runs={tmp_path}/missing", capsys=capsys)
    assert code == 2, err
    assert err.strip().splitlines() == [
        f"error: no training runs (metrics.json beside .hydra/) under {tmp_path}/missing"
    ]
    assert not (tmp_path / "missing").exists()  # Hydra made it for its log file
