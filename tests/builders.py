"""Builders the tests share: policies from the real Hydra configs, batches that fit them and
frames of the real env with the expert's actions."""

from __future__ import annotations

import copy
import functools
import logging
import runpy
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

import vla  # noqa: F401  (registers vla/Reach-v0)
from vla import keys
from vla.config import instantiate
from vla.envs.expert import expert_action
from vla.models.policy import VLAPolicy

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


@functools.cache
def _composed(config_name: str | None, overrides: tuple[str, ...]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides))


def _where_files_go(override: str) -> bool:
    return override.startswith(("paths.", "data.dir="))


def compose_config(config_name: str | None = "train", overrides=()) -> DictConfig:
    """The config a script composes, as a fresh copy. Hydra takes ~0.2 s a compose and the
    tests compose hundreds, so each set of overrides is composed once; overrides that only
    say where files go (paths.*, data.dir) are set on the copy, so tests that differ in
    their tmp_path alone share a compose."""
    cfg = copy.deepcopy(
        _composed(config_name, tuple(o for o in overrides if not _where_files_go(o)))
    )
    for key, value in (o.split("=", 1) for o in overrides if _where_files_go(o)):
        OmegaConf.update(cfg, key, value)
    return cfg


# a seconds-long training run: a few steps of the tiny model on 32 px images
FAST_RUN = ("debug=fast", "model=tiny", "env.image_size=32")


def fast_overrides_in(tmp: Path) -> list[str]:
    """FAST_RUN writing everything under `tmp` (its run in <tmp>/run, its data in <tmp>/data)."""
    return [*FAST_RUN, f"paths.output_dir={tmp}/run", f"data.dir={tmp}/data"]


def compose_model(name: str = "tiny", overrides=(), image_size: int = 32) -> DictConfig:
    """A root config holding only `model` (from conf/model/<name>.yaml) and `env.image_size`."""
    return compose_config(None, [f"+model={name}", f"+env.image_size={image_size}", *overrides])


def build_policy(name: str = "tiny", *overrides: str, image_size: int = 32, seed: int = 0):
    torch.manual_seed(seed)
    policy = instantiate(compose_model(name, overrides, image_size).model)
    assert isinstance(policy, VLAPolicy)
    return policy


def random_batch(policy: VLAPolicy, batch_size: int = 4, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    size = policy.image_encoder.image_size
    words = ["reach the red circle", "go to the blue square", "find the green triangle"]
    batch = {
        keys.IMAGE: torch.randint(0, 256, (batch_size, size, size, 3), generator=g).to(torch.uint8),
        keys.STATE: torch.rand(batch_size, 4, generator=g),
        keys.TOKENS: policy.tokenizer.encode([words[i % 3] for i in range(batch_size)]),
        keys.ACTION: torch.rand(batch_size, 2, generator=g) * 2 - 1,
        keys.TARGET: torch.rand(batch_size, 2, generator=g),
    }
    objects = torch.rand(batch_size, 3, 2, generator=g)  # three shapes, the target among them
    objects[torch.arange(batch_size), torch.arange(batch_size) % 3] = batch[keys.TARGET]
    return batch | {keys.OBJECTS: objects}


def env_frames(n: int = 32, image_size: int = 32):
    """n (image, state, instruction, expert action, target position) from the first steps of
    expert episodes of the real env, as stacked arrays (instructions: a list)."""
    env = gym.make("vla/Reach-v0", image_size=image_size)
    images, states, texts, actions, targets = [], [], [], [], []
    seed = 0
    while len(images) < n:
        obs, _ = env.reset(seed=seed)
        seed += 1
        for _ in range(4):
            action = expert_action(env.unwrapped)
            images.append(obs[keys.IMAGE])
            states.append(obs[keys.STATE])
            texts.append(obs[keys.INSTRUCTION])
            actions.append(action)
            targets.append(env.unwrapped.target_position.astype(np.float32))
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    env.close()
    return (
        np.stack(images[:n]),
        np.stack(states[:n]),
        texts[:n],
        np.stack(actions[:n]),
        np.stack(targets[:n]),
    )


def run_script_here(script: str, *args: str, capsys) -> tuple[int, str, str]:
    """`python scripts/<script> *args` run in this process: (exit status, stdout, stderr).

    For tests of what a command says and leaves behind, without a subprocess paying the
    ~7 s of imports again. The root logger's handlers (Hydra adds one writing
    <run>/<task>.log) are restored afterwards."""
    root, argv = logging.getLogger(), sys.argv
    handlers, level = list(root.handlers), root.level
    sys.argv = [str(CONF_DIR.parent / "scripts" / script), *args]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as e:
        code = 0 if e.code is None else e.code
    finally:
        sys.argv = argv
        for handler in set(root.handlers) - set(handlers):
            root.removeHandler(handler)
            handler.close()
        root.handlers[:], root.level = handlers, level
    out = capsys.readouterr()
    return code, out.out, out.err
