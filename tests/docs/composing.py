"""Composing the quotes with Hydra, sharing the composes between them.

Hydra takes ~0.25 s a compose, so only group choices are composed, each config once per set
of choices, shared by the quotes whose choices cannot change each other's keys (`_apart`);
each quote's values are then looked up in the result (`_fits`). What fails there is composed
again alone, for its message. A page's files for the reader to add (`new_files`) are on
Hydra's search path for its quotes (`new_conf`).
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf

from tests.docs.configs import CONF_DIR, OFF_BY_DEFAULT, written
from tests.docs.quotes import key_of, new_files


@dataclass(frozen=True)
class Try:
    """One way a quote may hold: `groups` composed with `config`, `values` and `keys` then
    found in the result."""

    config: str
    groups: tuple[str, ...]
    values: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    page: str = ""  # whose new files (`new_files`) Hydra also searches


@cache
def parse(override: str) -> Override:
    return OverridesParser.create().parse_overrides([override])[0]


@cache
def is_group(override: str) -> bool:
    """A group choice (`model/head=flow`, `trainer=gpu`, `~logger`), not a value: Hydra reads
    a dotted key as a value even where a group is (`model.head=flow`, which `_fits` refuses)."""
    key = parse(override).key_or_group
    return "/" in key or ("." not in key and (CONF_DIR / key).is_dir())


@cache
def _touches(override: str) -> tuple[str, ...]:
    """The config paths a group choice may set: what the option writes, and for a group
    chosen by default what any of its options writes (the default's keys go)."""
    group, value = parse(override).key_or_group, override.partition("=")[2]
    option = value if re.fullmatch(r"\w+", value) and override[0] != "~" else ""
    options = (
        [] if group in OFF_BY_DEFAULT else sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
    )
    return tuple(dict.fromkeys(p for o in [option, *options] for p in written(group, o)))


def overlap(a: str, b: str) -> bool:
    return not a or not b or a == b or a.startswith(f"{b}.") or b.startswith(f"{a}.")


def _apart(a: Try, b: Try) -> bool:
    """Whether `a` and `b` can share a compose: no group choice of one that the other lacks
    may set a path that the other sets or looks up, and no group is chosen twice."""
    chosen = {parse(g).key_or_group: g for g in a.groups}
    if any(chosen.get(parse(g).key_or_group, g) != g for g in b.groups):
        return False
    for x, y in ((a, b), (b, a)):
        paths = [p for g in y.groups for p in _touches(g)] + [key_of(v) for v in y.values + y.keys]
        for g in set(x.groups) - set(y.groups):
            if any(overlap(t, p) for t in _touches(g) for p in paths):
                return False
    return True


@cache
def new_conf(page: str) -> str:
    """A folder holding `page`'s new YAML as conf/ would (Hydra searches it too), or ""."""
    conf = {p.removeprefix("conf/"): t for p, t in new_files(page).items() if p.startswith("conf/")}
    if not conf:
        return ""
    folder = Path(tempfile.mkdtemp(prefix="docs-conf-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for path, text in conf.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return str(folder)


@cache
def _composed(config: str, groups: tuple[str, ...], page: str = "") -> DictConfig | str:
    """The config with these group choices (and Hydra's node), or why it does not compose."""
    searchpath = [f"hydra.searchpath=[file://{d}]" for d in [new_conf(page)] if d]
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config, [*groups, *searchpath], return_hydra_config=True)
    except Exception as e:  # any reason is the test's message
        return f"{type(e).__name__}: {e}".splitlines()[0]


def _node(cfg: DictConfig, key: str):
    node = cfg
    for part in key.split("."):
        if not OmegaConf.is_dict(node):
            return None
        if (node := node._get_node(part, validate_access=False)) is None:
            return None
    return node


def _fits(cfg: DictConfig, override: str) -> str | None:
    """None if Hydra would take the value `override` on `cfg`, else why not."""
    o = parse(override)
    key = o.key_or_group
    found = _node(cfg, key) is not None
    if o.is_force_add():
        return None
    if o.is_add():
        return f"Could not append to config. An item is already at '{key}'" if found else None
    if not found:
        return f"Could not {'delete' if o.is_delete() else 'override'} '{key}': no such key"
    if (CONF_DIR / key.replace(".", "/")).is_dir() and not isinstance(o.value(), dict | None):
        group = key.replace(".", "/")
        return f"{override} sets a config group like a value: choose one with {group}=..."
    return None


def _found(cfg: DictConfig, key: str) -> str | None:
    if "/" in key or (CONF_DIR / key).is_dir():
        return None if (CONF_DIR / key).is_dir() else f"no config group {key}"
    return None if _node(cfg, key) is not None else f"no key {key}"


def _verdicts(config: str, tries: list[Try]) -> dict[Try, str | None]:
    """The tries of one compose; if it fails, each half again, down to the one that fails."""
    groups = tuple(dict.fromkeys(g for t in tries for g in t.groups))
    cfg = _composed(config, groups, tries[0].page)
    if isinstance(cfg, str):
        if len(tries) == 1:
            return {tries[0]: cfg}
        half = len(tries) // 2
        return _verdicts(config, tries[:half]) | _verdicts(config, tries[half:])
    whys = {
        t: [*(_fits(cfg, v) for v in t.values), *(_found(cfg, k) for k in t.keys)] for t in tries
    }
    return {t: next((w for w in why if w), None) for t, why in whys.items()}


def verdicts(tries: list[Try]) -> dict[Try, str | None]:
    """{try: None if it holds, else why not}, sharing composes where `_apart` allows."""
    batches: list[list[Try]] = []
    for t in sorted(dict.fromkeys(tries), key=lambda t: -sum(len(_touches(g)) for g in t.groups)):
        fits = (
            b
            for b in batches
            if (b[0].config, b[0].page) == (t.config, t.page) and all(_apart(t, u) for u in b)
        )
        batch = next(fits, None)
        batch.append(t) if batch is not None else batches.append([t])
    return {t: why for b in batches for t, why in _verdicts(b[0].config, b).items()}


def failures(asked: list[list[list[Try]]]) -> dict[int, str]:
    """{index: why} of what does not hold: the first stage of all at once, then the next
    stage of what is still open, and so on; a quote as it is that failed in company is then
    tried alone."""
    held, result, depth = set(), {}, 0
    while open_ := [i for i, per in enumerate(asked) if i not in held and depth < len(per)]:
        result |= verdicts([t for i in open_ for t in asked[i][depth] if t not in result])
        held |= {i for i in open_ if any(result[t] is None for t in asked[i][depth])}
        depth += 1
    still = {i: per for i, per in enumerate(asked) if i not in held}
    alone = {t: _verdicts(t.config, [t])[t] for per in still.values() for t in per[0][:1]}
    return {i: alone[per[0][0]] for i, per in still.items() if alone[per[0][0]]}
