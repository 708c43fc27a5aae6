"""Episode seed ranges. Each episode seed belongs to exactly one use:

demonstrations       [0, 1e9)          episode i of a dataset uses data.seed + i
test rollouts        [1e9, 2e9)        final evaluation, scripts/eval.py, scripts/visualize.py
selection rollouts   [2e9, 2^31 - 1)   rollouts during training that pick the best checkpoint

Training never sees a test or selection episode, and the best checkpoint is chosen on episodes
it is not then tested on, so every reported test success rate is on unseen episodes.
"""

from vla.errors import SeedRangeError

TEST_SEED_START = 1_000_000_000
SELECTION_SEED_START = 2_000_000_000
SEED_LIMIT = 2**31 - 1  # gymnasium seeds are 32-bit signed

RANGES = {
    "demonstration": (0, TEST_SEED_START),
    "test": (TEST_SEED_START, SELECTION_SEED_START),
    "selection": (SELECTION_SEED_START, SEED_LIMIT),
}
_LAYOUT = (
    "demonstrations use [0, 1e9), test rollouts [1e9, 2e9), "
    "checkpoint-selection rollouts [2e9, 2^31-1)"
)


def check_seeds(use: str, first: int, num: int, key: str) -> None:
    """Refuses `num` episodes from seed `first` unless they all lie in the range of `use`.

    Args:
        use: "demonstration" | "test" | "selection".
        key: the config key that set `first`, quoted in the error (e.g. "eval.seed").
    """
    low, high = RANGES[use]
    last = first + num - 1
    if first < low or last >= high:
        raise SeedRangeError(
            f"{key}={first} with {num} episodes uses seeds {first}..{last}, outside the "
            f"{use} range [{low}, {high}) ({_LAYOUT})"
        )
