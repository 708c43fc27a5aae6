"""Watch the policy in a local web page: `python scripts/play.py ckpt_path=RUN`."""

from vla.commands.play import main  # also installed as `vla-play`

if __name__ == "__main__":
    main()
