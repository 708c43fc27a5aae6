"""The docs against the code: every command, override, config key, config group and file of
the repository that they quote exists in the code as it is.

The docs (README.md, docs/*.md) are the first thing a reader runs, and a renamed key or a
moved file breaks them silently; these tests make such a change fail here instead. What
counts as a quote is in tests/docs/quotes.py, how the options that left the code may still be
named in tests/docs/history.py, what each quote asks in tests/docs/asking.py, and how the
quotes are composed with Hydra, sharing composes, in tests/docs/composing.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.asking import alternatives, needs
from tests.docs.composing import failures
from tests.docs.configs import CONF_DIR, ROOT, SCRIPTS, every_key_in_conf
from tests.docs.history import REMOVED, REMOVED_AT, names_removed
from tests.docs.quotes import HISTORY_COMMIT, QUOTES, new_files


def test_the_docs_quote_commands_overrides_keys_and_files_of_every_kind():
    commands = [q for q in QUOTES if q.script is not None]
    assert {"train.py", "eval.py", "visualize.py", "benchmark.py", "study.py"} <= {
        q.script for q in commands
    }
    lone = [q for q in QUOTES if q.script is None and q.overrides]
    bare = [q for q in QUOTES if q.script is None and q.keys and not q.overrides]
    files = [q for q in QUOTES if q.files]
    # a parser that finds nothing fails here
    assert len(commands) > 50 and len(lone) > 100 and len(bare) > 100 and len(files) > 20
    quoted = {o for q in lone for o in q.overrides} | {k for q in bare for k in q.keys}
    assert {"experiment=chunked", "model/head=continuous", "~callbacks.ema"} <= quoted
    assert {"model.head.flow_steps", "trainer.num_nodes", "model/keypoints"} <= quoted
    assert alternatives(["seed=1,2", "model=tiny,base", "model/head=flow|discrete"]) == [
        ["seed=1", "model=tiny", "model/head=flow"],
        ["seed=1", "model=base", "model/head=flow"],
        ["seed=1", "model=tiny", "model/head=discrete"],
    ]
    assert [q.text for q in commands if q.script not in SCRIPTS] == []  # no such script
    no_hydra = [q for q in commands if q.script in SCRIPTS and SCRIPTS[q.script] is None]
    assert [q.text for q in no_hydra if q.overrides or q.keys] == []  # they take no overrides


def test_what_left_the_code_is_gone_and_named_only_as_history():
    """Each removed option is absent from conf/, and every quote of one sits where the docs
    say it is history (the commit that holds its code)."""
    assert len(REMOVED) >= 10, f"{REMOVED_AT[0].name}, '{REMOVED_AT[1]}': {REMOVED}"
    present = []
    for name in REMOVED:
        group, eq, option = name.partition("=")
        if eq:
            present += [name] * (CONF_DIR / group / f"{option}.yaml").exists()
        elif "/" in name:
            present += [name] * (CONF_DIR / name).exists()
        else:
            present += [name] * any(
                k == name or k.startswith(f"{name}.") for k in every_key_in_conf()
            )
    assert present == []
    live = [
        f"{q.unit.where}: {q.text}"
        for q in QUOTES
        if not q.unit.history
        and any(
            names_removed(o) for line in alternatives(list(q.overrides)) for o in [*line, *q.keys]
        )
    ]
    assert live == [], f"quoted outside history (a heading or paragraph naming {HISTORY_COMMIT})"


def test_every_quoted_command_override_and_key_composes():
    """A command with its script's config; an override line or a bare key with the first
    config that holds it (train's, most often), by default or with a group choice beside it."""
    asked = [(q, per) for q in QUOTES for per in needs(q)]
    why = failures([per for _, per in asked])
    assert [
        f"{q.unit.where}: {q.text}: {why[i]}" for i, (q, _) in enumerate(asked) if i in why
    ] == []


def test_every_quoted_file_exists():
    """Each file quoted is there (a bare `test_x.py`: one file of that name under tests/),
    holding what `::` names; a history quote's file may be gone."""
    tests: dict[str, list[Path]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        tests.setdefault(path.name, []).append(path)
    missing = []
    for q in QUOTES:
        for name, inside in q.files:
            there = [p for p in tests.get(name, []) if "/" not in name] or [ROOT / name]
            there = [p for p in there if p.exists()]
            if inside:
                defines = re.compile(rf"^\s*(def|class) {inside}\b", re.M)
                there = [p for p in there if p.is_file() and defines.search(p.read_text())]
            new = name in new_files(q.unit.page)
            if len(there) != 1 and not q.unit.history and not new:  # none, or several
                missing.append(f"{q.unit.where}: {q.text}")
    assert missing == []
