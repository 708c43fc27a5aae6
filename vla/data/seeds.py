"""Seed ranges. Training demonstrations and evaluation rollouts never share an episode seed.

demonstrations:  [0, EVAL_SEED_START)          (episode i of a dataset uses data.seed + i)
evaluation:      [EVAL_SEED_START, 2**31 - 1)  (episode i of an evaluation uses eval.seed + i)
"""

EVAL_SEED_START = 1_000_000_000
SEED_LIMIT = 2**31 - 1


def check_train_seeds(first: int, last: int) -> None:
    if first < 0 or last >= EVAL_SEED_START:
        raise ValueError(
            f"demonstration seeds {first}..{last} must lie in [0, {EVAL_SEED_START}): "
            "higher seeds are reserved for evaluation (lower data.seed or data.num_episodes)"
        )


def check_eval_seeds(first: int, last: int) -> None:
    if first < EVAL_SEED_START or last >= SEED_LIMIT:
        raise ValueError(
            f"evaluation seeds {first}..{last} must lie in [{EVAL_SEED_START}, {SEED_LIMIT}): "
            "lower seeds are used by training demonstrations (set eval.seed accordingly)"
        )
