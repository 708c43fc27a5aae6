"""Both stages end to end through `train` (tiny sizes): stage 1 writes per-family accuracy,
stage 2 starts from it, rolls out, and the checkpoint answers and acts."""

import json

import pytest

from tests.builders import compose_config
from vla.training.train import train
from vla.vlm.ask import ask
from vla.vlm.questions import FAMILIES

TINY = [
    "model.d_model=32", "model.depth=1", "data.corpus.num_scenes=60",
    "data.eval_corpus.num_scenes=10", "data.steps_per_epoch=4", "data.val_examples=16",
    "trainer.val_check_interval=4", "logger=csv", "threads=1",
]  # fmt: skip


@pytest.mark.slow
def test_vlm_then_rt2_from_it(tmp_path):
    data = f"data.dir={tmp_path}/data"
    vlm = train(
        compose_config("train", ["experiment=vlm", *TINY, data, f"paths.output_dir={tmp_path}/vlm"])
    )
    assert set(vlm["answers"]["all"]) == {*FAMILIES, "mean"}
    assert all(0 <= v["accuracy"] <= 1 for v in vlm["answers"]["all"].values())
    assert json.loads((tmp_path / "vlm" / "metrics.json").read_text())["stage"] == "vlm"
    rt2_args = [
        "experiment=rt2", *TINY, data, f"paths.output_dir={tmp_path}/rt2",
        f"model.init_from={tmp_path}/vlm", "data.num_episodes=12", "data.val_episodes=2",
        "eval.num_episodes=2", "eval.num_envs=2", "suite.only=[novel_pairs]",
    ]  # fmt: skip
    rt2 = train(compose_config("train", rt2_args))
    assert rt2["init_from"] == f"{tmp_path}/vlm" and rt2["num_episodes"] == 2
    assert 0 <= rt2["success_rate"] <= 1 and len(rt2["episodes"]) == 2
    assert rt2["suite"]["levels"][0]["level"] == "novel_pairs"
    ((instruction, answer),) = ask(tmp_path / "rt2", "what is in the scene")
    assert isinstance(answer, str) and instruction
