"""The policy's shape chain on one real batch: `python scripts/tour.py [model=tiny]`."""

from vla.commands.tour import main  # also installed as `vla-tour`

if __name__ == "__main__":
    main()
