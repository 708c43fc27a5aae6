"""What the code offers the docs: the config each script composes, and what the files of conf/
hold (the keys an option writes, the groups off by default, a config's first keys).

The docs checks read these straight from scripts/, vla/commands/ and conf/ rather than from
a list kept beside them, so a config added, renamed or removed is checked as it is.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = ROOT / "conf"  # the checkout's, as the scripts there compose it


def _command_text(script: Path) -> str:
    """What runs `script`: its command in vla/commands/ (`vla-<name>` installed), or itself."""
    command = ROOT / "vla" / "commands" / script.name
    return command.read_text() if command.is_file() else script.read_text()


SCRIPTS = {  # scripts/<name>.py -> the config its command composes (None: it takes no overrides)
    p.name: (m.group(1) if (m := re.search(r'config_name="(\w+)"', _command_text(p))) else None)
    for p in (ROOT / "scripts").glob("*.py")
}
CONFIGS = sorted({c for c in SCRIPTS.values() if c is not None})


def _top_names() -> set[str]:
    """What a config's first key may be: the groups of conf/ and every config's own keys."""
    names = {p.name for p in CONF_DIR.iterdir() if p.is_dir()}
    for path in CONF_DIR.glob("*.yaml"):
        names |= set(yaml.safe_load(path.read_text()) or {}) - {"defaults"}
    return names


TOP = _top_names()


@cache
def written(group: str, option: str, leaves: bool = False) -> tuple[str, ...]:
    """The config paths that choosing `option` of `group` (conf/<group>/<option>.yaml) may
    set: the node it replaces as a whole (its own package), or each key it writes (another
    package, `_global_`); and what its own defaults choose. `leaves`: each key, always."""
    package = group.replace("/", ".")
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.is_file():
        return (package,)  # a null choice, a deletion, a list of options, a plugin's config
    text = path.read_text()
    header = re.search(r"^# @package (\S+)", text, re.M)
    at = {None: package, "_group_": package, "_global_": ""}.get(header and header.group(1))
    at = header.group(1) if at is None else at
    data = yaml.safe_load(text) or {}
    whole = header is None or header.group(1) == "_group_"  # the option replaces its node
    paths = [at] if whole and at and not leaves else _leaves(data, at)
    for entry in data.get("defaults") or []:
        if entry == "_self_":
            continue
        sub, choice = next(iter(entry.items())) if isinstance(entry, dict) else (group, entry)
        if "@" in sub:  # a package of its own choosing: anything
            return ("",)
        sub = sub.removeprefix("override ").strip()
        sub = sub[1:] if sub.startswith("/") else sub if sub == group else f"{group}/{sub}"
        paths += written(sub, choice, leaves) if choice else [sub.replace("/", ".")]
    return tuple(paths)


def _leaves(data: dict, at: str) -> list[str]:
    paths = []
    for key, value in data.items():
        if key == "defaults":
            continue
        path = f"{at}.{key}" if at else str(key)
        paths += _leaves(value, path) if isinstance(value, dict) and value else [path]
    return paths


@cache
def every_key_in_conf() -> frozenset[str]:
    """Every key some file of conf/ writes."""
    keys = set()
    for path in CONF_DIR.rglob("*.yaml"):
        group = path.parent.relative_to(CONF_DIR).as_posix()
        if group == ".":
            keys |= set(_leaves(yaml.safe_load(path.read_text()) or {}, ""))
        else:
            keys |= set(written(group, path.stem, leaves=True))
    return frozenset(keys)


def _off_by_default() -> set[str]:
    """The groups a config's defaults list leaves empty (`experiment: null`)."""
    off = set()
    for path in CONF_DIR.glob("*.yaml"):
        for entry in (yaml.safe_load(path.read_text()) or {}).get("defaults") or []:
            off |= {k for k, v in entry.items() if v is None} if isinstance(entry, dict) else set()
    return off


OFF_BY_DEFAULT = _off_by_default()


@cache
def first_keys(config: str) -> set[str]:
    """The first keys a config has: its own, its groups', Hydra's."""
    data = yaml.safe_load((CONF_DIR / f"{config}.yaml").read_text()) or {}
    groups = {next(iter(d)) if isinstance(d, dict) else d for d in data.get("defaults", [])}
    return set(data) | groups | {"hydra"}
