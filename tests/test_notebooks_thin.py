"""Pages carry the argument, ``report`` carries the arithmetic: every code cell of the committed notebooks is a
short call whose result is shown or glued. A cell holds at most ``MAX_CELL_LINES`` non-blank lines and defines no
function; the computation goes into a named, tested function of ``vixnb/report``. The ``parameters`` cell is not
exempt (it is a list of names)."""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
MAX_CELL_LINES = 15
DEFINITION = re.compile(r"^\s*(async\s+)?def\s", re.MULTILINE)


def cell_problems(notebook):
    """Each code cell of ``notebook`` (a path) that is too long or defines a function, as ``cell N: why``."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    problems = []
    for number, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        lines = sum(1 for line in source.splitlines() if line.strip())
        if lines > MAX_CELL_LINES:
            problems.append(f"cell {number}: {lines} non-blank lines (at most {MAX_CELL_LINES})")
        if DEFINITION.search(source):
            problems.append(f"cell {number}: defines a function")
    return problems


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_code_cell_is_short_and_defines_no_function(notebook):
    assert not cell_problems(notebook), f"{notebook.name}: move the arithmetic into vixnb/report"


def test_the_check_finds_a_long_cell_and_a_definition(tmp_path):
    cells = [{"cell_type": "markdown", "source": ["x\n"] * 40},
             {"cell_type": "code", "source": ["a = 1\n", "\n"] * 15 + ["b = 2"]},
             {"cell_type": "code", "source": ["a = 1\n", "\n"] * 15},
             {"cell_type": "code", "source": ["x = 1\n", "    def f(y):\n", "        return y"]},
             {"cell_type": "code", "source": ["undefined = 'def '  # not a definition"]}]
    path = tmp_path / "fat.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert cell_problems(path) == ["cell 1: 16 non-blank lines (at most 15)", "cell 3: defines a function"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_cell_has_a_unique_id(notebook):
    """nbformat 4.5 gives every cell an ``id`` (a cell without one warns on every read, and will be an error);
    papermill and the book name cells by it."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    ids = [cell.get("id") for cell in cells]
    assert None not in ids, f"{notebook.name}: cell {ids.index(None)} has no id"
    assert len(set(ids)) == len(ids), f"{notebook.name}: two cells share an id"
