import pytest

from vla.checkpoint import load_policy

# Episodes where the untrained tiny policy sometimes succeeds: a wide success radius and
# short episodes, so success and failure both happen among a few seeds
EASY = {"success_radius": 0.3, "max_episode_steps": 10}
SEEDS = range(1_000_000_000, 1_000_000_008)


@pytest.fixture(scope="module")
def tiny(tiny_ckpt):
    """(policy, env kwargs) of the untrained tiny policy, in the EASY env."""
    policy, env_kwargs = load_policy(tiny_ckpt)
    return policy, {**env_kwargs, **EASY}


@pytest.fixture(scope="module")
def chunked(chunked_ckpt):
    """(policy, env kwargs) of the flow head predicting 4 actions, executing 2 per query."""
    policy, env_kwargs = load_policy(chunked_ckpt)
    return policy, {**env_kwargs, **EASY}


@pytest.fixture(scope="module")
def vlm(vlm_ckpt):
    """(policy, env kwargs) of an untrained small VLM (actions as its tokens), EASY env."""
    policy, env_kwargs = load_policy(vlm_ckpt)
    return policy, {**env_kwargs, **EASY}
