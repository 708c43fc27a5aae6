"""Draw where the policy looks: `python scripts/visualize.py ckpt_path=PATH`."""

from vla.commands.visualize import main  # also installed as `vla-visualize`

if __name__ == "__main__":
    main()
