"""The commands: `vla-<name>` once installed (pyproject.toml's [project.scripts]) and
`python scripts/<name>.py` in a checkout, the same function either way.

Each module here holds one command: `task(cfg)`, the plain function Hydra runs on the composed
`conf/<name>.yaml`, and `main = entry_point(task, config_name=...)`. Hydra names the job (and
its log file, `<run>/<name>.log`) after the module that defines `task`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import hydra

from vla.cli import run_script
from vla.config import CONF


def entry_point(task, config_name: str, argv: Callable[[list[str]], list[str]] | None = None):
    """The console entry point running `task` as a Hydra app on `CONF/<config_name>.yaml`;
    `argv` rewrites the command line before Hydra composes it (resuming a run)."""
    app = hydra.main(version_base="1.3", config_path=str(CONF), config_name=config_name)(task)

    def main() -> None:
        if argv is not None:
            sys.argv[1:] = argv(sys.argv[1:])
        run_script(app, config_name)

    return main
