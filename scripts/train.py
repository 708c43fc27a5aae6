"""Train a policy by behavior cloning: `python scripts/train.py model=small`.

`python scripts/train.py ckpt_path=<run folder>` resumes that run with its own config, in its
own folder; overrides on the same line change only what they name."""

from vla.commands.train import main  # also installed as `vla-train`

if __name__ == "__main__":
    main()
