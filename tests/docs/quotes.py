"""The quotes of the docs (README.md, docs/*.md): where each sits (a table row, list item,
paragraph or code block, below a heading) and what it names.

Quoted are:
- command lines, `python scripts/<x>.py ...` and `vla-<x> ...`, in code blocks (fenced or
  indented) and inline code, where a line ending in a backslash goes on: each composes with
  its script's config, as `--cfg job` would show it;
- overrides: inline code made only of them (`model.depth=2`, `experiment=flow`,
  `model/head=discrete|continuous`, `~callbacks.ema`), composed with the config of any script
  (`eval.record=2` is eval's, `bench.steps=60` the benchmark's);
- bare keys and groups: inline code that names a key without setting it (`trainer.num_nodes`,
  `model.head=...`) or a config group (`model/objects`);
- files: `vla/models/policy.py`, `tests/eval/test_chunking.py::test_x`, `test_heads.py::test_y`
  (the one test file of that name under tests/), each holding what `::` names. A page may show
  files for the reader to add (docs/extending.md: "`conf/model/head/x.yaml` (new)" and its
  code block): they need not exist, and its YAML is on Hydra's search path for its quotes.

Placeholders stand for a value the reader chooses and are read as one: `<run>` (any `<...>`),
an upper-case word (`PATH`, `DIR`, `S`), `[...]` (a list); `...` alone (the rest of a command)
is left out, and `key=...` (any value) names the key. Inline code that is Python, not a
command line, is listed in NOT_OVERRIDES.

The docs are read once, at import (QUOTES), and every check of tests/docs/ reads the result.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.docs.configs import CONF_DIR, ROOT, TOP

HISTORY_COMMIT = "71b5b1e"  # holds the code of what left it (tests/docs/history.py)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `python scripts/<name>.py ...` or, installed, `vla-<name> ...`
COMMAND = re.compile(r"(?:(?:python )?scripts/(\S+\.py)|(?<![\w/-])vla-(\w+)\b)(.*)", re.S)
OVERRIDE = re.compile(r"^[~+]*[a-z_][\w/.@-]*(=.*)?$")  # key=value, group/option=, ~key
BARE_KEY = re.compile(r"[a-z_]\w*(\.[a-z_]\w*)+")  # model.head.flow_steps
BARE_GROUP = re.compile(r"[a-z_]+(/[a-z_]+)+")  # model/objects
FILE = re.compile(r"((?:vla|tests|conf|docs|scripts)/[\w./-]*\w|test_\w+\.py)(?:::(\w+))?")
NOT_KEYS = re.compile(r"\.(py|md|json|png|yaml|ckpt|log|csv|gif|mp4|txt|safetensors)$")  # files
# a page's file for the reader to add: "`conf/model/head/x.yaml` (new) ..." then its code block
NEW_FILE = re.compile(
    r"^`((?:vla|conf)/[\w/.]+)` \(new\)[^\n]*\n(?:[^\n]+\n)*\n```\w+\n(.*?)^```", re.M | re.S
)
NOT_FILES = {"vla/conf"}  # where conf/ is installed (README), not a file of the checkout
NOT_OVERRIDES = {  # inline code shaped like an override that is Python, not a command line
    "render_mode=rgb_array",  # gym.make's keyword (README)
    "x_kv=None",  # MultiHeadAttention's argument (docs/reading-path.md)
}


# ---- the docs: where each quote sits ------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """A table row, list item, paragraph or code block of a doc."""

    page: str  # docs/x.md
    where: str  # docs/x.md:line
    text: str
    code: bool
    history: bool  # it, or a heading above it, names HISTORY_COMMIT
    section: int  # the line of the heading it is under


def units(path: Path) -> list[Unit]:
    lines, found = path.read_text().splitlines(), []
    headings: list[tuple[int, bool]] = []  # (level, names the commit) of the headings above
    block: list[str] = []
    first, code, section = 0, False, 0

    def close():
        if block:
            text = "\n".join(block)
            history = any(h for _, h in headings) or HISTORY_COMMIT in text
            page = str(path.relative_to(ROOT))
            found.append(Unit(page, f"{page}:{first + 1}", text, code, history, section))
            block.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            close()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            block[:], first, code = lines[i + 1 : end], i + 1, True
            close()
            i = end + 1
            continue
        if m := re.match(r"(#+) ", line):
            close()
            while headings and headings[-1][0] >= len(m.group(1)):
                headings.pop()
            headings.append((len(m.group(1)), HISTORY_COMMIT in line))
            section = i + 1
        elif not line.strip():
            close()
        else:
            if block and not code and re.match(r"\||\s{0,3}([-*]|\d+\.) ", line):
                close()  # a table row or list item of its own
            if not block:
                first, code = i, line.startswith("    ")
            block.append(line)
        i += 1
    close()
    return found


@dataclass(frozen=True)
class Quote:
    unit: Unit
    text: str
    script: str | None = None  # a command's; None: an override line, any script's
    overrides: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # bare keys and groups: model.head.flow_steps, model/objects
    files: tuple[tuple[str, str | None], ...] = ()  # (path, name after ::)


def _tokens(text: str, comments: bool = False) -> tuple[list[str], list[str]]:
    """(overrides, bare keys) in `text`, each placeholder read as a value; `key=...` names
    `key`, and a lone `...` is left out."""
    text = re.sub(r"<[^<>]*>", "x", text).replace("[...]", "[]")  # <run>, suite.only=[...]
    tokens, keys = [], []
    for token in shlex.split(text, comments=comments):
        key, eq, value = token.partition("=")
        if value == "...":
            keys.append(key)
        elif token != "...":
            tokens.append(f"{key}=x" if eq and re.fullmatch(r"[A-Z]+", value) else token)
    return tokens, keys


def _is_key(span: str) -> bool:
    return bool(
        BARE_KEY.fullmatch(span) and span.split(".")[0] in TOP and not NOT_KEYS.search(span)
    )


def _nests_groups(span: str) -> bool:
    """`model/objects` (model/ holds groups), not a scalar's name (`eval/success_rate`)."""
    top = CONF_DIR / span.split("/")[0]
    return top.is_dir() and any(p.is_dir() for p in top.iterdir())


def quotes(unit: Unit) -> list[Quote]:
    found = []
    if unit.code:
        for line in unit.text.replace("\\\n", " ").splitlines():
            if m := COMMAND.search(line):
                found.append(_command(unit, line, m, comments=True))
        return found
    for span in (s.replace("\n", " ").strip() for s in re.findall(r"`([^`]+)`", unit.text)):
        if m := COMMAND.search(span):
            found.append(_command(unit, span, m, comments=False))
        elif "=" in span or span.startswith("~"):
            try:
                tokens, keys = _tokens(span)
            except ValueError:  # an unclosed quote: prose, not an override
                continue
            tokens = [t for t in tokens if t not in NOT_OVERRIDES]
            if (tokens or keys) and all(OVERRIDE.match(t) for t in [*tokens, *keys]):
                found.append(Quote(unit, span, None, tuple(tokens), tuple(keys)))
        elif _is_key(span) or (BARE_GROUP.fullmatch(span) and _nests_groups(span)):
            found.append(Quote(unit, span, keys=(span,)))
        elif (
            (m := FILE.fullmatch(span)) and span not in NOT_FILES and not re.search(r"-v\d+$", span)
        ):
            found.append(Quote(unit, span, files=((m.group(1), m.group(2)),)))
    return found


def _command(unit: Unit, line: str, m: re.Match, comments: bool) -> Quote:
    script = m.group(1) or f"{m.group(2)}.py"
    tokens, keys = _tokens(m.group(3), comments)
    tokens = [t for t in tokens if not t.startswith("-")]
    return Quote(unit, line.strip(), script, tuple(tokens), tuple(keys))


QUOTES = [q for path in DOCS for unit in units(path) for q in quotes(unit)]


@cache
def new_files(page: str) -> dict[str, str]:
    """{path: text} of the files `page` shows for the reader to add (docs/extending.md)."""
    return dict(NEW_FILE.findall((ROOT / page).read_text())) if page else {}


def key_of(override: str) -> str:
    """The config path an override names: `~model/head=flow` -> `model.head`."""
    return override.lstrip("~+").split("=")[0].replace("/", ".")
