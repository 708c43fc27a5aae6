"""Write a config's demonstrations, or a trained policy, in another format:
`python scripts/export.py format=lerobot out=<folder> [experiment=suite]`, or
`python scripts/export.py format=pretrained ckpt_path=<run or .ckpt> out=<folder>`
(`push_to_hub=<user>/<name>` also publishes it)."""

from vla.commands.export import main  # also installed as `vla-export`

if __name__ == "__main__":
    main()
