"""`ckpt_path` and `compare_to` take a pretrained folder: the same episodes as its checkpoint,
and a bad folder refused by the command in one `error:` line."""

import shutil

from tests.builders import run_script_here
from vla.checkpoint import load_policy
from vla.eval.evaluate import evaluate


def test_a_folder_and_its_checkpoint_agree_on_every_episode(chunked_ckpt, compose_cfg, tmp_path):
    policy, _ = load_policy(chunked_ckpt)  # flow head: sampled chunks, the same noise
    folder = policy.save_pretrained(tmp_path / "pretrained_model")
    cfg = compose_cfg(
        "eval",
        [
            f"ckpt_path={chunked_ckpt}",
            f"compare_to={folder / 'config.json'}",  # a file of the folder names the folder
            "eval.num_episodes=6",
            "eval.num_envs=3",
            "env.success_radius=0.3",  # untrained: some episodes succeed, some fail
            f"paths.output_dir={tmp_path / 'eval'}",
        ],
    )
    summary = evaluate(cfg)
    (row,) = summary["levels"]
    assert summary["b"] == str(folder)
    assert (row["only_a"], row["only_b"]) == (0, 0) and row["a"] == row["b"]
    assert 0 < row["a"]["success_rate"] < 1  # outcomes that could have differed


def test_eval_refuses_a_bad_folder_in_one_line(tiny_ckpt, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = load_policy(tiny_ckpt)[0].save_pretrained(tmp_path / "pm")
    shutil.copy(tiny_ckpt, folder / "pytorch_model.ckpt")
    code, _, err = run_script_here("eval.py", f"ckpt_path={folder}", capsys=capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {folder / 'pytorch_model.ckpt'} is a pickled file")
