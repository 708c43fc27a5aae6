"""Roll out the scripted expert and write demonstrations: `python scripts/collect.py`."""

from vla.commands.collect import main  # also installed as `vla-collect`

if __name__ == "__main__":
    main()
