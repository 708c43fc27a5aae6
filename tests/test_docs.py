"""Every command line and override the docs quote composes, as `--cfg job` would show it.

Quoted are: `python scripts/<x>.py ...` and `vla-<x> ...` lines (in code blocks and inline code, where a line
ending in a backslash goes on) and inline code made only of overrides (`model.depth=2`,
`experiment=flow`, `model/head=discrete|continuous`, `~callbacks.ema`). A command composes
with its script's config; a lone override with the config of any script (`eval.record=2`
is eval's, `bench.steps=60` the benchmark's). Placeholders stand for a value the reader
chooses and are read as one: `<run>` (any `<...>`), an upper-case word (`PATH`, `DIR`, `S`),
`[...]` (a list); `...` alone (the rest of a command) and `key=...` (any value) are left out.
Inline code that is Python, not a command line, is listed in NOT_OVERRIDES.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from tests.builders import CONF_DIR, compose_config
from vla.config import check_group_choices

ROOT = CONF_DIR.parent


def _command_text(script: Path) -> str:
    """What runs `script`: its command in vla/commands/ (`vla-<name>` installed), or itself."""
    command = ROOT / "vla" / "commands" / script.name
    return command.read_text() if command.is_file() else script.read_text()


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPTS = {  # scripts/<name>.py -> the config its command composes (None: it takes no overrides)
    p.name: (m.group(1) if (m := re.search(r'config_name="(\w+)"', _command_text(p))) else None)
    for p in (ROOT / "scripts").glob("*.py")
}
CONFIGS = sorted({c for c in SCRIPTS.values() if c is not None})
# `python scripts/<name>.py ...` or, installed, `vla-<name> ...`
COMMAND = re.compile(r"(?:(?:python )?scripts/(\S+\.py)|(?<![\w/-])vla-(\w+)\b)(.*)", re.S)
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
OVERRIDE = re.compile(r"^[~+]*[a-z_][\w/.@-]*(=.*)?$")  # key=value, group/option=, ~key
NOT_OVERRIDES = {  # inline code shaped like an override that is Python, not a command line
    "render_mode=rgb_array",  # gym.make's keyword (README)
    "x_kv=None",  # MultiHeadAttention's argument (docs/reading-path.md)
}


def _tokens(text: str, comments: bool = False) -> list[str]:
    """The overrides in `text`, each placeholder read as a value; `key=...` (any value) is
    left out, as is a lone `...`."""
    text = re.sub(r"<[^<>]*>", "x", text).replace("[...]", "[]")  # <run>, suite.only=[...]
    tokens = []
    for token in shlex.split(text, comments=comments):
        key, eq, value = token.partition("=")
        if token != "..." and value != "...":
            tokens.append(f"{key}=x" if eq and re.fullmatch(r"[A-Z]+", value) else token)
    return tokens


def quoted(path: Path) -> tuple[list[tuple[str, list[str]]], list[list[str]]]:
    """([(script, arguments)], [overrides]) quoted in one markdown file."""
    text = path.read_text()
    commands, lone = [], []
    blocks = [b.replace("\\\n", " ") for b in FENCE.findall(text)]
    lines = [line for b in blocks for line in b.splitlines() if COMMAND.search(line)]
    spans = re.findall(r"`([^`]+)`", FENCE.sub("", text))  # inline code may wrap lines
    for line, comments in [*((ln, True) for ln in lines), *((s, False) for s in spans)]:
        if m := COMMAND.search(line):
            args = _tokens(m.group(3), comments)
            script = m.group(1) or f"{m.group(2)}.py"
            commands.append((script, [t for t in args if not t.startswith("-")]))
        elif "=" in line or line.startswith("~"):
            try:
                tokens = _tokens(line)
            except ValueError:  # an unclosed quote: prose, not an override
                continue
            tokens = [t for t in tokens if t not in NOT_OVERRIDES]
            if tokens and all(OVERRIDE.match(t) for t in tokens):
                lone.append(tokens)
    return commands, lone


def _is_group(key: str) -> bool:
    return (CONF_DIR / key.replace(".", "/")).is_dir()


def alternatives(overrides: list[str]) -> list[list[str]]:
    """The override lists a line offers: each option of a swept group (`-m model=tiny,small`)
    or of a group's choices (`model/head=discrete|flow`) in turn, the others at their first.
    A value only needs its key to exist, so a swept value (`seed=1,2`) is composed once."""
    choices = []
    for o in overrides:
        key, eq, value = o.partition("=")
        if not eq or value.startswith(("[", "'", '"')):  # ~key, a list, a quoted string
            choices.append([o])
            continue
        options = [f"{key}={v}" for v in value.split("|")]
        parsed = OverridesParser.create().parse_overrides(options)
        sweep = [
            f"{p.get_key_element()}={v}" if p.is_sweep_override() else p.input_line
            for p in parsed
            for v in (p.sweep_string_iterator() if p.is_sweep_override() else [None])
        ]
        choices.append(sweep if _is_group(_key(o)) else sweep[:1])
    first = [c[0] for c in choices]
    return [first] + [
        first[:i] + [option] + first[i + 1 :] for i, c in enumerate(choices) for option in c[1:]
    ]


@cache
def composes(config: str, overrides: tuple[str, ...]) -> str | None:
    """None if `overrides` compose with `config` and choose groups as groups, else why not."""
    try:
        check_group_choices(compose_config(config, overrides))
    except Exception as e:  # any reason is the test's message
        return f"{type(e).__name__}: {e}".splitlines()[0]
    return None


def _key(override: str) -> str:
    return override.lstrip("~+").split("=")[0].replace("/", ".")


def _meet(a: str, b: str) -> bool:
    """Two overrides that cannot share a compose: two choices of one group, a key added or
    removed and set, or a group chosen or a key removed and a key inside it set. Two values
    of one key can (the last is kept); if others fail together, `failing` finds out."""
    ka, kb = _key(a), _key(b)
    if ka == kb:
        return a != b and (_is_group(ka) or a[0] in "~+" or b[0] in "~+")
    outer, inner = (a, kb) if kb.startswith(f"{ka}.") else (b, ka)
    if not inner.startswith(f"{_key(outer)}."):
        return False
    return outer[0] == "~" or _is_group(_key(outer))


def failing(config: str, lines: list[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    """{line: why} for the override lines that do not compose with `config`. Hydra takes
    ~0.2 s a compose, so lines whose overrides do not meet are composed together, and halved
    until the lines that fail are found."""
    batches: list[list[tuple[str, ...]]] = []
    for line in dict.fromkeys(lines):
        fits = (b for b in batches if not any(_meet(o, p) for ln in b for p in ln for o in line))
        batch = next(fits, None)
        batch.append(line) if batch is not None else batches.append([line])
    return {ln: why for batch in batches for ln, why in _halving(config, batch).items()}


def _halving(config: str, batch: list[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    if composes(config, tuple(dict.fromkeys(o for ln in batch for o in ln))) is None:
        return {}
    if len(batch) == 1:
        return {batch[0]: composes(config, batch[0])}
    half = len(batch) // 2
    found = _halving(config, batch[:half]) | _halving(config, batch[half:])
    if found:
        return found
    lone = {ln: composes(config, ln) for ln in batch}  # they fail only together
    return {ln: why for ln, why in lone.items() if why is not None}


@cache
def _base(config: str):
    return compose_config(config)


def _names_only_keys_of(config: str, line: tuple[str, ...]) -> bool:
    """Whether every key `line` sets or removes is in `config` as composed by default, or in
    a group its defaults list leaves empty (`suite: null` in eval's); hydra.* are everyone's."""
    absent, defaults = object(), (CONF_DIR / f"{config}.yaml").read_text()

    def has(key: str) -> bool:
        return (
            OmegaConf.select(_base(config), key, default=absent, throw_on_resolution_failure=False)
            is not absent
        )

    def in_empty_group(key: str) -> bool:
        group = key.split(".")[0]
        return not has(group) and re.search(rf"^  - {group}: null", defaults, re.M) is not None

    keys = [_key(o) for o in line if not o.startswith(("+", "hydra"))]
    return all(has(k) or in_empty_group(k) for k in keys)


def _where(path: Path) -> str:
    return str(path.relative_to(ROOT))


COMMANDS = [(_where(p), *c) for p in DOCS for c in quoted(p)[0]]
LONE = [(_where(p), o) for p in DOCS for o in quoted(p)[1]]


def test_the_docs_quote_commands_and_overrides_of_every_kind():
    scripts = {script for _, script, _ in COMMANDS}
    assert {"train.py", "eval.py", "visualize.py", "benchmark.py", "study.py"} <= scripts
    assert len(COMMANDS) > 50 and len(LONE) > 100  # a parser that finds nothing fails here
    quoted_lone = {o for _, line in LONE for o in line}
    assert {"experiment=chunked", "model/head=continuous", "~callbacks.ema"} <= quoted_lone
    assert alternatives(["seed=1,2", "model=tiny,base", "model/head=flow|discrete"]) == [
        ["seed=1", "model=tiny", "model/head=flow"],
        ["seed=1", "model=base", "model/head=flow"],
        ["seed=1", "model=tiny", "model/head=discrete"],
    ]
    for script in {s for _, s, _ in COMMANDS}:
        assert script in SCRIPTS, f"scripts/{script} does not exist"
    assert [(w, s, a) for w, s, a in COMMANDS if SCRIPTS[s] is None and a] == []  # no Hydra


def test_every_quoted_command_and_override_composes():
    """A command with its script's config; a lone override with the first config that has
    its keys (train's, most often), or failing that, any."""
    quotes = [
        (w, SCRIPTS[s], tuple(ln)) for w, s, a in COMMANDS if SCRIPTS[s] for ln in alternatives(a)
    ]
    for w, line in LONE:
        for ln in map(tuple, alternatives(line)):
            fits = [c for c in ["train", *CONFIGS] if _names_only_keys_of(c, ln)]
            quotes.append((w, (fits or ["train"])[0], ln))
    why = {}
    for config in CONFIGS:
        why |= {
            (config, ln): w
            for ln, w in failing(config, [ln for _, c, ln in quotes if c == config]).items()
        }
    lone = {tuple(ln) for _, line in LONE for ln in alternatives(line)}
    for config, ln in list(why):  # a lone override may be another script's after all
        if ln in lone and any(composes(c, ln) is None for c in CONFIGS):
            del why[config, ln]
    wrong = [f"{w}: {c} {' '.join(ln)}: {why[c, ln]}" for w, c, ln in quotes if (c, ln) in why]
    assert wrong == []
