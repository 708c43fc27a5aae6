"""What each quote asks of the code: the override lists it offers, and the composes (tries)
that may hold each of them.

A command asks its script's config. An override line or a bare key asks the first config of
the scripts that holds it (train's, most often): a key, like an override line that chooses
no group, exists in a script's config by default or with a group choice quoted under the same
heading that writes it (`model.head.flow_steps` beside
`model/head=discrete,continuous,autoregressive,flow`, `trainer.num_nodes` beside
`trainer=ddp`). A history quote (tests/docs/history.py) asks nothing of what left the code.
"""

from __future__ import annotations

import re
from functools import cache

from hydra.core.override_parser.overrides_parser import OverridesParser

from tests.docs.composing import Try, is_group, new_conf, overlap, parse
from tests.docs.configs import CONF_DIR, CONFIGS, SCRIPTS, first_keys, written
from tests.docs.history import names_removed
from tests.docs.quotes import QUOTES, Quote, key_of


def _configs_for(overrides: list[str]) -> list[str]:
    """The scripts' configs a lone quote may belong to, train's first: those whose first
    keys hold every first key it names."""
    firsts = {key_of(o).split(".")[0] for o in overrides if o[0] != "+"}
    return [c for c in dict.fromkeys(["train", *CONFIGS]) if firsts <= first_keys(c)] or ["train"]


def alternatives(overrides: list[str] | tuple[str, ...]) -> list[list[str]]:
    """The override lists a line offers: each option of a swept group (`-m model=tiny,small`)
    or of a group's choices (`model/head=discrete|flow`) in turn, the others at their first.
    A value only needs its key to exist, so a swept value (`seed=1,2`) is looked up once."""
    return [list(line) for line in _alternatives(tuple(overrides))]


@cache
def _alternatives(overrides: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    choices = []
    for o in overrides:
        key, eq, value = o.partition("=")
        if not eq or value.startswith(("[", "'", '"')):  # ~key, a list, a quoted string
            choices.append([o])
            continue
        parsed = OverridesParser.create().parse_overrides([f"{key}={v}" for v in value.split("|")])
        sweep = [
            f"{p.get_key_element()}={v}" if p.is_sweep_override() else p.input_line
            for p in parsed
            for v in (p.sweep_string_iterator() if p.is_sweep_override() else [None])
        ]
        choices.append(sweep if is_group(o) else sweep[:1])
    first = tuple(c[0] for c in choices)
    return (first,) + tuple(
        first[:i] + (option,) + first[i + 1 :] for i, c in enumerate(choices) for option in c[1:]
    )


@cache
def _choices_in(page: str, section: int) -> tuple[str, ...]:
    """The group choices a section's override lines offer, every option of a group it names
    (`model/head=...`, `model/objects`) and the option a conf/ file it names holds."""
    choices = []
    for q in QUOTES:
        if (q.unit.page, q.unit.section) == (page, section) and q.script is None:
            choices += [g for line in _alternatives(q.overrides) for g in line if is_group(g)]
            groups = [k for k in q.keys if (CONF_DIR / k).is_dir()]
            choices += [
                f"{k}={p.stem}" for k in groups for p in sorted((CONF_DIR / k).glob("*.yaml"))
            ]
        for name, _ in q.files if (q.unit.page, q.unit.section) == (page, section) else []:
            group, _, option = name.removeprefix("conf/").rpartition("/")  # model/head/flow.yaml
            if name.startswith("conf/") and group and option.endswith(".yaml"):
                add = "" if (CONF_DIR / group).is_dir() else "+"  # a group the page adds
                choices.append(f"{add}{group}={option.removesuffix('.yaml')}")
    return tuple(dict.fromkeys(choices))


def needs(q: Quote) -> list[list[list[Try]]]:
    """What `q` asks: each of its alternatives must hold, and holds if one of the tries of
    some stage does; stages are tried in turn. A command has one try, with its script's
    config. A lone quote tries each config that may hold it, first as it is and then, if it
    chooses no group itself, with each group choice quoted in its section. A history quote
    leaves out what names a removed option."""
    if q.script is not None and SCRIPTS.get(q.script) is None:
        return []  # no Hydra, no such script: the first test's
    keep = (lambda o: not names_removed(o)) if q.unit.history else (lambda o: True)
    keys = tuple(k for k in q.keys if keep(k))
    page = q.unit.page if new_conf(q.unit.page) else ""
    beside = [(g,) for g in _choices_in(q.unit.page, q.unit.section) if not names_removed(g)]
    asked = []
    for line in alternatives(list(q.overrides)):
        line = [o for o in line if keep(o)]
        groups = tuple(o for o in line if is_group(o))
        values = tuple(o for o in line if not is_group(o))
        if not line and not keys:
            continue
        if q.script is not None:
            asked.append([[Try(SCRIPTS[q.script], groups, values, keys, page)]])
            continue
        stages, looked = [], [key_of(v) for v in [*values, *keys]]
        for c in _configs_for([*line, *keys]):
            stages.append([Try(c, groups, values, keys, page)])
            fit = [
                e
                for e in beside
                if key_of(e[0]).split(".")[0] in first_keys(c) and _adds(e[0], looked)
            ]
            stages += [[Try(c, e, values, keys, page) for e in fit]] if fit and not groups else []
        asked.append(stages)
    return asked


def _adds(choice: str, keys: list[str]) -> bool:
    """Whether a group choice writes a key at, above or below one of `keys`: only such a
    choice can make a key exist."""
    group, value = parse(choice).key_or_group, choice.partition("=")[2]
    writes = written(group, value, leaves=True) if re.fullmatch(r"\w+", value) else (group,)
    return any(overlap(w, k) for w in writes for k in keys)
