"""`python scripts/export.py format=lerobot out=<folder>`: collects what is missing, writes,
and refuses what it cannot do with one line."""

import json

import pytest

from tests.builders import run_script_here

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

from vla.lerobot.reader import read_lerobot  # noqa: E402


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    return [f"hydra.run.dir={tmp_path}/run", f"data.dir={tmp_path}/data", "env.image_size=16"]


def test_exports_the_config_demonstrations(run, tmp_path, capsys):
    out = tmp_path / "export"
    args = ("format=lerobot", f"out={out}", "experiment=suite", "data.num_episodes=4")
    code, stdout, err = run_script_here("export.py", *run, *args, capsys=capsys)
    assert code == 0, err
    assert "4 episodes" in stdout and "collected 4 episodes" in stdout
    assert len(list((tmp_path / "data").glob("reach-*"))) == 1  # collected as train would
    data = read_lerobot(out)
    assert data.info["total_episodes"] == 4 and data.info["fps"] == 10
    source = json.loads((out / "meta/vla_export.json").read_text())
    assert source["env"]["families"] == ["name", "attribute", "relation", "sequence"]
    # again over its own export: replaced, and the demonstrations are not collected again
    code, stdout, err = run_script_here("export.py", *run, *args, capsys=capsys)
    assert code == 0, err
    assert "collected" not in stdout


def test_refusals_are_one_line(run, tmp_path, capsys):
    code, _, err = run_script_here(
        "export.py", *run, "format=rlds", f"out={tmp_path}/x", capsys=capsys
    )
    assert (
        code == 2
        and err.strip()
        == "error: format='rlds' is unknown: expected one of ['lerobot', 'pretrained']"
    )
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    code, _, err = run_script_here("export.py", *run, f"out={foreign}", capsys=capsys)
    assert code == 2 and err.startswith("error: out=") and "did not write" in err
    assert "Traceback" not in err and not (tmp_path / "data").exists()  # refused before collecting
