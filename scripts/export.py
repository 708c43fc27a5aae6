"""Write a config's demonstrations in another format:
`python scripts/export.py format=lerobot out=<folder> [experiment=suite]`."""

from vla.commands.export import main  # also installed as `vla-export`

if __name__ == "__main__":
    main()
