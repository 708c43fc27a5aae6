"""Both stages end to end through `train` (tiny sizes), as every policy trains: stage 1 writes
per-family accuracy and chooses checkpoints without an env; stage 2 starts from it, rolls out,
resumes, writes its pretrained folder; the checkpoint answers and acts through eval.py."""

import json

import pytest

from tests.builders import compose_config
from vla.checkpoint import read_checkpoint
from vla.eval.evaluate import evaluate
from vla.eval.visualize import visualize
from vla.pretrained.folder import read_pretrained
from vla.training.train import train
from vla.vlm.caption_errors import KINDS, caption_errors
from vla.vlm.model import VLMPolicy
from vla.vlm.paired import compare, held_out_hits
from vla.vlm.questions import FAMILIES

TINY = [
    "model.d_model=32", "model.depth=1", "model.vision.channels=4", "data.corpus.num_scenes=60",
    "data.eval_corpus.num_scenes=10", "data.steps_per_epoch=4", "data.val_scenes=3",
    "trainer.val_check_interval=4", "logger=csv", "threads=1",
]  # fmt: skip
ROLLOUTS = ["callbacks.rollout_eval.num_episodes=2", "eval.num_episodes=2", "eval.num_envs=2"]


@pytest.mark.slow
def test_vlm_then_rt2_from_it_then_answers_and_acts(tmp_path):
    data = f"data.dir={tmp_path}/data"
    vlm = train(
        compose_config("train", ["experiment=vlm", *TINY, data, f"paths.output_dir={tmp_path}/vlm"])
    )
    assert set(vlm["answers"]["all"]) == {*FAMILIES, "mean"}
    assert all(0 <= v["accuracy"] <= 1 for v in vlm["answers"]["all"].values())
    eyes = vlm["answers"]["keypoint_on_shape"]  # only the families that ask about a shape
    assert "pointing" in eyes and "caption" not in eyes and "count" not in eyes
    assert vlm["evaluated"] is False and "val_loss" in vlm["best_checkpoint"]  # no env
    saved = json.loads((tmp_path / "vlm" / "metrics.json").read_text())
    assert saved["corpus"]["num_examples"] > 0 and saved["global_step"] == 4
    rows = compare(tmp_path / "vlm", tmp_path / "vlm")  # paired against itself: the same hits
    for family, r in rows.items():
        if family != "all":
            assert r["a"] == r["b"] == vlm["answers"]["all"][family]["accuracy"], family
        assert r["only_a"] == r["only_b"] == 0 and r["p"] == 1.0
    assert rows["all"]["n"] == sum(
        v.get("n", 0) for f, v in vlm["answers"]["all"].items() if f != "mean"
    )
    captions = caption_errors(tmp_path / "vlm")  # the same greedy answers, sorted by kind
    assert captions["right"] / captions["n"] == vlm["answers"]["all"]["caption"]["accuracy"]
    assert captions["n"] == captions["right"] + sum(captions[k] for k in KINDS)
    assert sum(n for _, n in captions["by_shapes"].values()) == captions["n"]
    named = captions["named"]  # a right caption names every shape right
    assert sum(named[s][s] for s in named) >= 2 * captions["right"]
    corpora = set((tmp_path / "data").iterdir())
    scenes, _, _ = held_out_hits(tmp_path / "vlm", seed=1_234_567)  # fresh scenes, same config
    assert scenes["seed"] == 1_234_567 and scenes["num_scenes"] == 10
    assert len(set((tmp_path / "data").iterdir()) - corpora) == 1  # generated and cached

    rt2_args = [
        "experiment=rt2", *TINY, *ROLLOUTS, data, f"model.init_from={tmp_path}/vlm",
        "data.num_episodes=12", "data.val_episodes=2", "trainer.max_epochs=1",
    ]  # fmt: skip
    rt2_cfg = compose_config(
        "train", [*rt2_args, "logger=tensorboard", f"paths.output_dir={tmp_path}/rt2"]
    )  # TensorBoard: the rollouts' GIFs and the VLM's attention picture
    rt2 = train(rt2_cfg)
    assert 0 <= rt2["success_rate"] <= 1 and rt2["num_episodes"] == 2
    assert rt2["answers"]["all"]["mean"]["accuracy"] >= 0  # co-fine-tuned: it still answers
    ckpt = read_checkpoint(tmp_path / "rt2" / "checkpoints" / "last.ckpt")
    assert ckpt["vla"]["policy_config"]["init_from"] == f"{tmp_path}/vlm"
    assert isinstance(read_pretrained(tmp_path / "rt2" / "pretrained_model"), VLMPolicy)
    for stage in ("vlm", "rt2"):  # the model card's code runs as it stands: it answers (and acts)
        folder = tmp_path / stage / "pretrained_model"
        code = (folder / "README.md").read_text().split("```python\n")[1].split("```")[0]
        exec(code.replace("<this folder or Hub id>", str(folder)), {})
        assert ("env.step" in code) == (stage == "rt2")

    # resuming the run goes on from its step with its own config
    resumed = train(
        compose_config(
            "train",
            [
                *rt2_args,
                "trainer.max_epochs=2",
                f"ckpt_path={tmp_path}/rt2/checkpoints/last.ckpt",
                f"paths.output_dir={tmp_path}/rt2",
            ],
        )
    )
    assert resumed["global_step"] == 8

    def run_eval(*args):
        cfg = compose_config("eval", [f"ckpt_path={tmp_path}/rt2", *args, "eval.num_envs=2"])
        return evaluate(cfg)

    asked = run_eval("eval.question=what is in the scene", "eval.num_episodes=3",
                     "eval.record=1", f"paths.output_dir={tmp_path}/ask")  # fmt: skip
    assert [a["seed"] for a in asked["answers"]] == [1_000_000_000 + i for i in range(3)]
    assert (tmp_path / "ask" / "answer_00.png").is_file()
    paired = run_eval(f"compare_to={tmp_path}/rt2", "suite=levels", "suite.only=[novel_pairs]",
                      "eval.num_episodes=2", f"paths.output_dir={tmp_path}/compare")  # fmt: skip
    assert paired is not None
    stage1 = compose_config(
        "eval", [f"ckpt_path={tmp_path}/vlm", "eval.question=where is the red circle",
                 "eval.num_episodes=1", f"paths.output_dir={tmp_path}/ask1"],
    )  # fmt: skip
    assert len(evaluate(stage1)["answers"]) == 1  # a stage-1 VLM answers about the default env
    pictures = visualize(
        compose_config(
            "visualize",
            [
                f"ckpt_path={tmp_path}/rt2",
                "viz.num_episodes=1",
                "viz.steps=[0]",
                f"paths.output_dir={tmp_path}/viz",
            ],
        )  # fmt: skip
    )
    assert len(pictures) == 1 and pictures[0].is_file()
