"""docs/tutorial.ipynb: its script twin holds the same cells, and it runs top to bottom (a
kernel of its own, the checkout's root as working directory) without an error, drawing every
picture it means to and training a policy that works."""

from __future__ import annotations

import re
import time
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "tutorial.ipynb"
TWIN = ROOT / "docs" / "tutorial.py"
BUDGET_S = 300  # the goal alone on a 2-core CPU; beside the other tests (-n auto) it takes longer


def cells(notebook) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in notebook.cells]


def test_the_script_twin_holds_the_notebooks_cells():
    assert cells(jupytext.read(TWIN)) == cells(nbformat.read(NOTEBOOK, as_version=4))


@pytest.mark.slow
def test_the_notebook_runs_top_to_bottom_with_every_picture():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=2 * BUDGET_S,
        kernel_name="python3",
        resources={"metadata": {"path": ROOT}},
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on an error
    seconds = time.perf_counter() - start
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    pictures = [m for o in outputs for m in o.get("data", {}) if m.startswith("image/")]
    # the learning curve, the rollout GIF and the attention map
    assert sorted(pictures) == ["image/gif", "image/png", "image/png"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    trained = re.search(r"success (\d+\.\d)% of (\d+) test episodes", text)
    assert trained and float(trained[1]) >= 90 and trained[2] == "200"
    rates = dict(re.findall(r"^(instruction|\"go to the\")\s+success (\d+)% of 100", text, re.M))
    assert int(rates["instruction"]) >= 90 and int(rates['"go to the"']) <= 60
    assert seconds < 3 * BUDGET_S  # about 2 minutes alone (docs/tutorial.py)
