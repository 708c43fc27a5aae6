"""What reading a LeRobotDataset costs over this project's own demonstrations, measured side by
side in one process: the data module of each, from construction to training tensors.

    python -m vla.lerobot.loadtime <export folder> [repeats] [key=value ...]

The export must hold the same demonstrations as the config names (`python scripts/export.py
format=lerobot out=<export folder>` with the same overrides); the native set is loaded from
data/ (collected first if missing, before any timing). Prints each loader's median seconds
over `repeats` alternating rounds after a warm-up round, and their difference.
"""

from __future__ import annotations

import statistics
import sys
import time

from hydra import compose, initialize_config_dir
from hydra.utils import get_class, instantiate

from vla.config import CONF
from vla.data.prepare import demos_of
from vla.envs.config import env_kwargs_of


def setup_seconds(cfg) -> float:
    """Seconds from building `cfg.data`'s data module to its training tensors."""
    from vla.models.language import Tokenizer

    start = time.perf_counter()
    get_class(cfg.data._target_).configure(cfg)
    datamodule = instantiate(
        cfg.data, env=env_kwargs_of(cfg.env), tokenize=Tokenizer().encode, shuffle_seed=0
    )
    datamodule.prepare_data()
    datamodule.setup("fit")
    return time.perf_counter() - start


def main(argv: list[str]) -> None:
    folder, repeats = argv[0], int(argv[1]) if len(argv) > 1 else 3
    overrides = argv[2:]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        native = compose("train", overrides=overrides)
        lerobot = compose("train", overrides=[*overrides, "data=lerobot", f"data.path={folder}"])
    demos_of(native)  # collected before any timing
    times = {"native": [], "lerobot": []}
    for cfg in (native, lerobot):  # a warm-up round, not counted
        setup_seconds(cfg.copy())
    for _ in range(repeats):
        for name, cfg in (("native", native), ("lerobot", lerobot)):
            times[name].append(setup_seconds(cfg.copy()))
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name}: median {med[name]:.2f} s ({', '.join(f'{x:.2f}' for x in t)})")
    print(f"lerobot - native: {med['lerobot'] - med['native']:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
