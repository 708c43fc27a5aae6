"""Shared builders: policies from the real Hydra configs, and batches that fit them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig

from vla import keys
from vla.models.policy import VLAPolicy

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose_model(name: str = "tiny", overrides=(), image_size: int = 32) -> DictConfig:
    """A root config holding only `model` (from conf/model/<name>.yaml) and `env.image_size`."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(overrides=[f"+model={name}", f"+env.image_size={image_size}", *overrides])


def build_policy(name: str = "tiny", *overrides: str, image_size: int = 32, seed: int = 0):
    torch.manual_seed(seed)
    policy = instantiate(compose_model(name, overrides, image_size).model.policy)
    assert isinstance(policy, VLAPolicy)
    return policy


def random_batch(policy: VLAPolicy, batch_size: int = 4, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    size = policy.image_encoder.image_size
    words = ["reach the red circle", "go to the blue square", "find the green triangle"]
    return {
        keys.IMAGE: torch.randint(0, 256, (batch_size, size, size, 3), generator=g).to(torch.uint8),
        keys.STATE: torch.rand(batch_size, 4, generator=g),
        keys.TOKENS: policy.tokenizer.encode([words[i % 3] for i in range(batch_size)]),
        keys.ACTION: torch.rand(batch_size, 2, generator=g) * 2 - 1,
        keys.TARGET: torch.rand(batch_size, 2, generator=g),
    }


@pytest.fixture(autouse=True)
def one_thread():
    """Run these small models on one intra-op thread, restoring the setting afterwards.

    At these sizes a second thread buys little, and on a machine whose cores are busy with
    other work, OpenMP threads waiting on each other made a training step ~50x slower.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def make_policy():
    return build_policy


@pytest.fixture
def make_batch():
    return random_batch


@pytest.fixture
def compose_model_cfg():
    return compose_model
