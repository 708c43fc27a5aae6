import os

import pytest

# Commands the tests start use one thread each: the tests run one process per core
# (pytest -n auto), and OpenMP threads contending for busy cores stall each other.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def one_thread():
    """Run every test on one intra-op thread, restoring the setting afterwards.

    At these sizes a second thread buys little, and on a machine whose cores are busy with
    other work, OpenMP threads waiting on each other made a training step ~50x slower (and
    the rollout tests ~30x).
    """
    import torch  # here, not at the top: pytest-xdist's controller runs no test

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def compose_cfg():
    """compose_cfg(config_name, overrides) -> DictConfig, as the scripts would see it."""
    from tests.builders import compose_config

    return compose_config


@pytest.fixture
def fast_overrides(tmp_path):
    """A seconds-long training run writing everything under tmp_path."""
    from tests.builders import fast_overrides_in

    return fast_overrides_in(tmp_path)


def _untrained_checkpoint(tmp, overrides=(), model="model=tiny"):
    """`<tmp>/run/checkpoints/last.ckpt` of an untrained tiny policy (32 px images), written
    by the code training writes checkpoints with (the recipe's payload, the atomic writer) and
    normalised by the statistics of real expert frames: what a test that only reads a
    checkpoint needs, in a second instead of a training run (tests/training trains)."""
    import torch

    from tests.builders import compose_config, env_frames
    from vla.checkpoint import AtomicCheckpointIO
    from vla.config import instantiate
    from vla.envs.config import env_kwargs_of
    from vla.training.module import build_module

    cfg = compose_config("train", [model, "env.image_size=32", *overrides])
    torch.manual_seed(0)
    policy = instantiate(cfg.model)
    _, states, _, actions, _ = env_frames(n=64)
    policy.set_normalization(states.mean(0), states.std(0), actions.min(0), actions.max(0))
    if hasattr(policy, "action_bins"):  # a VLM: its action tokens' bins, from the same actions
        policy.action_bins.fit(torch.as_tensor(actions))
    module = build_module(cfg, policy, env_kwargs_of(cfg.env))
    checkpoint = {"state_dict": module.state_dict(), "global_step": 0}
    module.on_save_checkpoint(checkpoint)
    path = tmp / "run" / "checkpoints" / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint(checkpoint, path)
    return path


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory):
    """last.ckpt of an untrained tiny policy, shared by tests that only read it."""
    return _untrained_checkpoint(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def chunked_ckpt(tmp_path_factory):
    """The same with the flow head predicting chunks of 4 actions, executing 2 per query
    (episodes of at most 10 steps keep its rollouts short)."""
    overrides = [
        "model/head=flow",
        "model.chunk_size=4",
        "model.n_action_steps=2",
        "env.max_episode_steps=10",
    ]
    return _untrained_checkpoint(tmp_path_factory.mktemp("chunked"), overrides)


@pytest.fixture(scope="session")
def vlm_ckpt(tmp_path_factory):
    """The same for a small untrained VLM acting through its action tokens (experiment=rt2)."""
    small = ["model.d_model=32", "model.depth=2", "model.vision.channels=4"]
    return _untrained_checkpoint(tmp_path_factory.mktemp("vlm"), small, model="experiment=rt2")
