"""docs/extending.md's two worked examples, copied out of the page: each file it shows is
written into a temporary folder that the package (`vla.models`, `vla.models.heads`) and
Hydra's search path reach, each training command it shows runs (a few steps), and what the
new parts compute is checked with numbers."""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import vla.models
import vla.models.heads
from tests.builders import FAST_RUN, run_script_here
from vla import keys
from vla.checkpoint import load_policy
from vla.envs.grammar import COLOURS

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "extending.md").read_text()
# a line naming a file of the reader's folder, then its code block
FILES = dict(
    re.findall(
        r"^`((?:vla|conf)/[\w/.]+)` \(new\)[^\n]*\n(?:[^\n]+\n)*\n```\w+\n(.*?)^```",
        DOC,
        re.M | re.S,
    )
)
COMMANDS = re.findall(r"^python scripts/train\.py (.*)$", DOC, re.M)
NEW_MODULES = ("vla.models.heads.gaussian", "vla.models.colours")


@pytest.fixture
def new_files(tmp_path, monkeypatch):
    """The page's files under <tmp>/new, as if they were in the checkout: its Python files
    found as modules of vla.models and vla.models.heads, its YAML on Hydra's search path."""
    new = tmp_path / "new"
    for path, text in FILES.items():
        (new / path).parent.mkdir(parents=True, exist_ok=True)
        (new / path).write_text(text)
    for package in (vla.models, vla.models.heads):
        where = new / package.__name__.replace(".", "/")
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(where)])
    yield tmp_path
    for name in NEW_MODULES:
        sys.modules.pop(name, None)


def test_the_page_shows_two_files_of_python_two_yaml_files_and_two_commands():
    assert sorted(FILES) == [
        "conf/model/colours/pixels.yaml",
        "conf/model/head/gaussian.yaml",
        "vla/models/colours.py",
        "vla/models/heads/gaussian.py",
    ]
    assert len(COMMANDS) == 2
    for path in ("vla/models/heads/gaussian.py", "vla/models/colours.py"):
        assert len(FILES[path].splitlines()) <= 40, path  # "about 30 lines"


def train_as_the_page_says(command: str, tmp: Path, capsys) -> tuple[dict, object]:
    args = [*shlex.split(command), *FAST_RUN, f"hydra.run.dir={tmp}/run", f"data.dir={tmp}/data"]
    args.append(f"hydra.searchpath=[file://{tmp}/new/conf]")
    code, out, err = run_script_here("train.py", *args, capsys=capsys)
    assert code == 0, err[-2000:]
    metrics = json.loads((tmp / "run" / "metrics.json").read_text())
    policy, _ = load_policy(tmp / "run" / "checkpoints" / "last.ckpt")
    return metrics, policy


@pytest.mark.slow
def test_the_gaussian_head_trains_and_acts_with_its_mean(new_files, capsys):
    (command,) = [c for c in COMMANDS if "model/head=gaussian" in c]
    metrics, policy = train_as_the_page_says(command, new_files, capsys)
    assert type(policy.head).__name__ == "GaussianHead"
    assert metrics["global_step"] == 5 and 0.0 <= metrics["success_rate"] <= 1.0
    head = policy.head
    # a head that says mean 0.5 and std 2 for every action
    last = head.net[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.5, 0.5, math.log(2), math.log(2)]))
    features = torch.randn(3, 1, head.d_model)
    target = torch.tensor([[[1.5, 0.5]], [[0.5, 0.5]], [[-0.5, 0.5]]])  # [B,K,A]: z = +-0.5, 0
    loss, logs = head.loss(features, target)
    assert loss.item() == pytest.approx(2 * 0.5 * 0.5**2 / 6 + math.log(2))  # 0.5 z^2 + log std
    assert logs["std"].item() == pytest.approx(2.0)
    pad = torch.tensor([[True], [False], [True]])  # only the second sample counts: z = 0
    assert head.loss(features, target, pad)[0].item() == pytest.approx(math.log(2))
    assert torch.equal(head.predict(features), torch.full((3, 1, 2), 0.5))


@pytest.mark.slow
def test_the_colour_tokens_train_and_find_each_colour(new_files, capsys):
    (command,) = [c for c in COMMANDS if "+model/colours=pixels" in c]
    _, policy = train_as_the_page_says(command, new_files, capsys)
    layout = policy.token_layout(5)
    assert list(layout)[:3] == ["image", "keypoints", "colours"]
    assert layout["colours"].stop - layout["colours"].start == 4  # red, green, blue, yellow
    # on real frames the named target's colour token sits on the target
    env = gym.make("vla/Reach-v0", image_size=32)
    errors = []
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        colour = obs[keys.INSTRUCTION].split()[-2]  # "... the red circle"
        image = torch.from_numpy(obs[keys.IMAGE])[None]
        xy = policy.sources["colours"](image, None).outputs["colour_xy"][0]  # [C,2]
        index = list(COLOURS).index(colour)
        expected = 2 * env.unwrapped.target_position - 1  # arena [0,1] -> image [-1,1]
        errors.append(np.abs(xy[index].numpy() - expected).max())
    env.close()
    # within 1.6 px of 32 (a triangle's centroid is not its centre); shapes are >= 0.4 apart
    assert max(errors) < 0.1
