"""A constructor default is the value the config gives it: a class built in code
(`ReachEnv()`, `gym.make("vla/Reach-v0")`, a notebook's `KeypointEncoder(...)`) behaves as the
training recipe does, or takes no default at all."""

import inspect
import os

import hydra.utils
import pytest
from omegaconf import OmegaConf

from tests.builders import compose_config
from vla.data.datamodule import ReachDataModule
from vla.envs.reach import ReachEnv
from vla.models.policy import VLAPolicy

CFG = compose_config("train", [])
PARTS = ["image_encoder", "text_encoder", "state_encoder", "readout", "encoder", "keypoints"]


def _plain(value):
    """Tuples as lists, paths in their normal form: the config's spelling of the same value."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return os.path.normpath(value) if isinstance(value, str) else value  # "./data" is "data"


def _mismatches(cls, node) -> list[str]:
    values = OmegaConf.to_container(node, resolve=True)
    wrong = []
    for name, p in inspect.signature(cls.__init__).parameters.items():
        given = values.get(name)
        if p.default is inspect.Parameter.empty or name not in values or isinstance(given, dict):
            continue  # no default, not configured, or a part whose default None means "off"
        if _plain(p.default) != _plain(given):
            wrong.append(f"{cls.__name__}({name}={p.default!r}) but the config says {given!r}")
    return wrong


@pytest.mark.parametrize(
    "cls, node",
    [(ReachEnv, CFG.env), (ReachDataModule, CFG.data)]
    + [(VLAPolicy, CFG.model)]
    + [(hydra.utils.get_class(CFG.model[k]._target_), CFG.model[k]) for k in PARTS],
    ids=["env", "data", "policy", *PARTS],
)
def test_constructor_defaults_are_the_configs_values(cls, node):
    assert _mismatches(cls, node) == []
