"""What the command-line scripts share: one clear line for the user's errors, no stack trace,
no empty run folder left behind, a hint for a mistyped override; and for everything else (a
bug) the full traceback, on the console and in the run's log file."""

from __future__ import annotations

import difflib
import logging
import os
import shutil
import signal
import sys
from pathlib import Path

from hydra.utils import get_method
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from vla.config import CONF
from vla.console import setup_console
from vla.errors import ConfigError, TrainingInterrupted, UserError
from vla.training.stopping import exit_status, sigterm_stops

# The user's to fix: our own checks, and config errors OmegaConf finds (a missing `???` value,
# an interpolation to a key that is not there)
USER_ERRORS = (UserError, OmegaConfBaseException)
log = logging.getLogger(__name__)


def run_cli(fn, cfg):
    """Runs `fn(cfg)`. `fn` may be a dotted path ("vla.training.train.train"), imported only
    after the command line's values are checked, so that a bad one is refused before the
    seconds of torch and Lightning imports.

    The user's error exits with status 2 and one line on stderr, a non-finite loss with
    status 1. Ctrl-C and SIGTERM stop it with one line and status 128 + the signal (130,
    143): in training after saving a checkpoint, the line saying how to resume (on rank 0
    only); anywhere else, such as collecting demonstrations, without a traceback.
    Any other exception is a bug: it propagates with its traceback, which also goes into the
    run's log file.

    Set VLA_DEBUG=1 to get the full traceback of the user's errors too.
    """
    try:
        with sigterm_stops():
            check_override_types(cfg)
            if isinstance(fn, str):
                fn = get_method(fn)  # Hydra's import of a `_target_`
            setup_console()  # after the imports: Lightning gives itself handlers when imported
            return fn(cfg)
    except TrainingInterrupted as e:  # the user's stop, not an error
        log_to_file(str(e))
        if e.rank_zero:
            print(e, file=sys.stderr)
        sys.exit(exit_status(e.signum))
    except (*USER_ERRORS, FloatingPointError) as e:
        log_to_file(f"error: {e}")
        if isinstance(e, USER_ERRORS):
            remove_unstarted_run(cfg)
        if os.environ.get("VLA_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2 if isinstance(e, USER_ERRORS) else 1)
    except KeyboardInterrupt as e:  # outside training: start-up, collection, the final evaluation
        signum = getattr(e, "signum", signal.SIGINT)
        message = "interrupted (Ctrl-C)" if signum == signal.SIGINT else f"stopped ({e})"
        log_to_file(message)
        print(message, file=sys.stderr)
        sys.exit(exit_status(signum))
    except Exception as e:
        log_to_file(f"{type(e).__name__}: {e}", exc_info=sys.exc_info())
        raise


def log_to_file(message: str, exc_info=None) -> None:
    """Writes a record into the run's log file only: the console gets its own copy (the one
    line, or the traceback Hydra prints)."""
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, message, None, exc_info)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def log_file_into(folder: Path) -> None:
    """From now on, also writes the log file into `folder` when the run's folder is not the
    one Hydra logs into (paths.output_dir set apart from hydra.run.dir), so that every run
    folder holds its own log."""
    root = logging.getLogger()
    files = [h for h in root.handlers if isinstance(h, logging.FileHandler)]
    if not files or any(Path(h.baseFilename).parent == folder.resolve() for h in files):
        return
    handler = logging.FileHandler(folder.resolve() / Path(files[0].baseFilename).name)
    handler.setFormatter(files[0].formatter)
    handler.setLevel(files[0].level)
    root.addHandler(handler)


def remove_unstarted_run(cfg) -> Path | None:
    """Removes the run folder Hydra made for a command that failed before writing anything
    (it holds only `.hydra/` and the log file), and the folders above it inside
    `paths.log_dir` (where the config has one) that this leaves empty; returns the run folder
    if it was removed."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.RUN:
        return None
    hydra_cfg = HydraConfig.get()
    run = Path(hydra_cfg.runtime.output_dir)
    made_by_hydra = {".hydra", f"{hydra_cfg.job.name}.log"}
    if not run.is_dir() or {p.name for p in run.iterdir()} - made_by_hydra:
        return None
    for handler in logging.getLogger().handlers:  # the log file is about to go
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == run:
            logging.getLogger().removeHandler(handler)
            handler.close()
    shutil.rmtree(run)
    log_dir = OmegaConf.select(cfg, "paths.log_dir")  # none for the study: it writes into `runs`
    if log_dir is None:
        return run
    parent = run.resolve().parent
    while parent.is_relative_to(Path(log_dir).resolve()) and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent
    return run


def run_script(main, config_name: str) -> None:
    """Runs a script's `@hydra.main` function. When it fails, an override whose key is not in
    the config but close to one that is gets a line after Hydra's own message:
    `model.dmodel=64` -> "did you mean model.d_model?"."""
    try:
        main()
    except SystemExit as e:
        if e.code not in (None, 0):
            for hint in override_hints(config_name, sys.argv[1:]):
                print(hint, file=sys.stderr)
        raise


def override_hints(config_name: str, args: list[str]) -> list[str]:
    """'did you mean ...?' for each `key=value` in `args` whose key the config lacks."""
    plain = [a for a in args if "=" in a and not a.startswith(("-", "+", "~", "hydra"))]
    keys = [a.split("=", 1)[0] for a in plain]
    cfg = compose_with_choices(config_name, plain)
    if cfg is None:
        return []
    known = set(_flat_keys(OmegaConf.to_container(cfg, resolve=False)))
    known |= {p.relative_to(CONF).as_posix() for p in CONF.rglob("*") if p.is_dir()}  # model/head
    hints = []
    for key in keys:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        choice = None if key in known else group_choice_with(key)
        if choice:
            hints.append(f"{key} is a key of {choice}: add {choice} to the command")
        elif key not in known and close:
            hints.append(f"did you mean {close[0]}? ({key} is not a key of the config)")
    return hints


def compose_with_choices(config_name: str, overrides: list[str]):
    """The config with the group choices among `overrides` (`model=tiny`) and no other value
    overridden: what each key holds by default. The defaults alone if a choice is invalid."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    groups = [a for a in overrides if "=" in a and "." not in a.split("=", 1)[0]]
    for choices in (groups, []):
        try:
            if GlobalHydra.instance().is_initialized():  # the script's own, on conf/
                return compose(config_name=config_name, overrides=choices)
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                return compose(config_name=config_name, overrides=choices)
        except Exception:  # an invalid choice: fall back to the defaults
            continue
    return None


TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number"}


def check_override_types(cfg) -> None:
    """A command-line value of another type than the key's default (`trainer.max_epochs=abc`)
    is refused like a wrong value, naming the key and what it takes, before any work."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return
    hydra_cfg = HydraConfig.get()
    plain = [o for o in hydra_cfg.overrides.task if "=" in o and not o.startswith(("~", "hydra"))]
    values = [o.lstrip("+") for o in plain if "." in o.split("=", 1)[0]]
    if not values:
        return
    defaults = compose_with_choices(hydra_cfg.job.config_name, plain)
    for key in (v.split("=", 1)[0] for v in values):
        try:
            default = OmegaConf.select(defaults, key)
            value = OmegaConf.select(cfg, key)
        except OmegaConfBaseException:  # an interpolation only a running job resolves
            continue
        expected = type(default)
        if expected not in TYPE_NAMES or value is None or isinstance(value, expected):
            continue
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        shown = str(default).lower() if expected is bool else default
        raise ConfigError(
            f"{key}={value!r} must be {TYPE_NAMES[expected]} (the default is {shown})"
        )


def group_choice_with(key: str) -> str | None:
    """The group choice whose config has `key` (`model.head.flow_steps` -> `model/head=flow`),
    for a key that the chosen option lacks."""
    for group in sorted(p for p in CONF.rglob("*") if p.is_dir()):
        prefix = ".".join(group.relative_to(CONF).parts) + "."
        if key.startswith(prefix):
            name = key.removeprefix(prefix).split(".")[0]
            for option in sorted(group.glob("*.yaml")):
                if name in OmegaConf.load(option):
                    return f"{group.relative_to(CONF).as_posix()}={option.stem}"
    return None


def _flat_keys(node, prefix: str = ""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{prefix}{k}"
            yield from _flat_keys(v, f"{prefix}{k}.")
