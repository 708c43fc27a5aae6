"""What left the code: the options the docs may still name, but only as history.

They are the first column of the table under the heading "Removed from the code" in
docs/generalisation.md, with the commit that holds them (HISTORY_COMMIT). A quote may name one
only in a table row, list item, paragraph or code block, or below a heading, that names that
commit. There the removed overrides (and the keys inside a removed group) are left out and the
rest is checked as any other quote, so a misspelt live key beside a removed option still
fails; a file such a quote names may be gone.
"""

from __future__ import annotations

import re

from tests.docs.configs import ROOT
from tests.docs.quotes import key_of

REMOVED_AT = (ROOT / "docs" / "generalisation.md", "Removed from the code")


def removed_options() -> list[str]:
    """The first column of the table below REMOVED_AT's heading: `model/referents` (a group),
    `model/objects=hybrid` (an option), `model.encoder.film` (a key)."""
    path, heading = REMOVED_AT
    text = path.read_text()
    section = re.search(rf"^#+ {heading}.*?\n(.*?)(?=^#|\Z)", text, re.S | re.M)
    if section is None:
        return []  # the test of what left the code says so
    rows = [r for r in section.group(1).splitlines() if r.startswith("|")][2:]
    return [name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])]


REMOVED = removed_options()


def names_removed(override: str) -> bool:
    key, value = key_of(override), override.partition("=")[2]
    for name in REMOVED:
        group, eq, option = name.partition("=")
        if eq:
            if key == group.replace("/", ".") and value == option:
                return True
        elif key == key_of(name) or key.startswith(f"{key_of(name)}."):
            return True
    return False
