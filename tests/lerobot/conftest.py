import pytest

from vla.data.collect import collect
from vla.data.dataset import load_demos

ENV = dict(num_targets=3, image_size=32)
FPS = 10


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """Six expert episodes of 32 px frames (a few hundred steps)."""
    root = tmp_path_factory.mktemp("demos")
    return load_demos(collect(ENV, root, num_episodes=6, seed=3, progress=False))


@pytest.fixture(scope="module")
def exported(demos, tmp_path_factory):
    """`demos` as a LeRobotDataset folder."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    from vla.lerobot.export import export_lerobot

    return export_lerobot(demos, tmp_path_factory.mktemp("lerobot") / "reach", FPS, progress=False)
