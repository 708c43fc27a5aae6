"""Summarise a learning-speed study: `python scripts/study.py runs=outputs/train/multirun/<date>`."""

from vla.commands.study import main  # also installed as `vla-study`

if __name__ == "__main__":
    main()
