"""The example notebooks (notebooks/*.ipynb): committed without outputs, and — the named suite ``-m notebooks`` —
each runs top to bottom in a fresh Jupyter kernel, its key numbers asserted in its own cells (a failed assert
fails the test, with the cell and its traceback)."""
import json

import pytest

from helpers import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_notebooks_are_there_and_committed_without_outputs():
    assert {p.name for p in NOTEBOOKS} >= {"seeds_tour_zh.ipynb", "researcher_tour.ipynb"}
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        assert all(c["outputs"] == [] and c["execution_count"] is None for c in code), f"{path.name}: clear outputs"
        assert sum("assert " in "".join(c["source"]) for c in code) >= 6, f"{path.name}: its numbers are asserted"


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_notebook_runs_in_a_fresh_kernel(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))          # the checkout's attnkit (an installed one works as well)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    book = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(book, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
