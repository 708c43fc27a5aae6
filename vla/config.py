"""Where the config folder is; objects built from its nodes, the user's error in front."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf

from vla.errors import ConfigError, UserError


def _conf_dir() -> Path:
    """The config folder: `vla/conf`, package data, when installed from a wheel (`pip install
    .`); the checkout's top-level `conf/` when run from it (an editable install, PYTHONPATH)."""
    packaged = Path(str(files("vla") / "conf"))
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[1] / "conf"


CONF = _conf_dir()


def check_group_choices(cfg: DictConfig) -> None:
    """Refuses a config group set like a value: `model.head=flow` replaces the head's node
    by the string "flow" (what it meant is the group choice `model/head=flow`)."""
    for group in sorted(p for p in CONF.rglob("*") if p.is_dir()):
        key = ".".join(group.relative_to(CONF).parts)
        value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        if value is not None and not OmegaConf.is_config(value):
            options = "|".join(sorted(p.stem for p in group.glob("*.yaml")))
            raise ConfigError(
                f"{key}={value!r} sets a config group like a value: choose one with "
                f"{key.replace('.', '/')}=<{options}>"
            )


def instantiate(node, **kwargs):
    """`hydra.utils.instantiate`, re-raising the user's error as itself.

    Hydra wraps every constructor error in an InstantiationException. For a bad value
    (`d_model=100 is not divisible by n_heads=3`, a UserError) the original message is the one
    to show; an argument the constructor does not take (`+model.head.depth=2` on a head without
    one) becomes a ConfigError naming the config node. Anything else is a bug and stays wrapped,
    with its traceback.
    """
    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as e:
        cause = e.__cause__
        while isinstance(cause, InstantiationException) and cause.__cause__ is not None:
            cause = cause.__cause__
        if isinstance(cause, UserError):
            raise cause from None
        if isinstance(cause, TypeError) and _raised_by_the_call(cause):
            last = str(e).splitlines()[-1].strip()  # Hydra's "full_key: model.head"
            where = f" ({last})" if last.startswith("full_key:") else ""
            raise ConfigError(f"{cause}{where}") from None
        raise


def _raised_by_the_call(error: TypeError) -> bool:
    """True when binding the config's arguments failed (the error's last frame is Hydra's
    call), not code inside the constructor."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "_call_target"
