from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

CONF = str(Path(__file__).resolve().parents[1] / "conf")


@pytest.fixture
def compose_cfg():
    """compose_cfg(config_name, overrides) -> DictConfig, as the scripts would see it."""

    def _compose(config_name: str = "train", overrides: list[str] = ()):
        with initialize_config_dir(config_dir=CONF, version_base="1.3"):
            return compose(config_name=config_name, overrides=list(overrides))

    return _compose


@pytest.fixture
def fast_overrides(tmp_path):
    """A seconds-long training run writing everything under tmp_path."""
    return [
        "debug=fast",
        "model=tiny",
        "env.image_size=32",
        f"paths.output_dir={tmp_path}/run",
        f"data.dir={tmp_path}/data",
    ]


def _fast_checkpoint(tmp, overrides=()):
    """last.ckpt of a seconds-long tiny training run in `tmp`."""
    from vla.training.train import train

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(
            "train",
            [
                "debug=fast",
                "model=tiny",
                "env.image_size=32",
                "~logger",
                f"paths.output_dir={tmp}/run",
                f"data.dir={tmp}/data",
                *overrides,
            ],
        )
    train(cfg)
    return tmp / "run" / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory):
    """last.ckpt of a seconds-long tiny training run, shared by tests that only read it."""
    return _fast_checkpoint(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def chunked_ckpt(tmp_path_factory):
    """The same with the flow head predicting chunks of 4 actions, executing 2 per query
    (episodes of at most 10 steps keep its rollouts short)."""
    overrides = [
        "model.head=flow",
        "model.chunk_size=4",
        "model.n_action_steps=2",
        "env.max_episode_steps=10",
    ]
    return _fast_checkpoint(tmp_path_factory.mktemp("chunked"), overrides)
