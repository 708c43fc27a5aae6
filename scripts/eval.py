"""Evaluate a checkpoint with rollouts: `python scripts/eval.py ckpt_path=PATH`."""

from vla.commands.eval import main  # also installed as `vla-eval`

if __name__ == "__main__":
    main()
