"""Measure training, rollout and inference speed: `python scripts/benchmark.py`."""

from vla.commands.benchmark import main  # also installed as `vla-benchmark`

if __name__ == "__main__":
    main()
