"""Every CSV export neutralises spreadsheet formulas, and goes through the one helper that does it.
"""
from __future__ import annotations

import ast

from helpers import dashboard_sources, ROOT


def test_csv_exports_neutralise_formulas():
    import csv
    import io

    import pandas as pd

    from attnkit import app as ui

    cells = ["=1+1", "+SUM(A1)", "-2+3", "@cmd", "\tx", "\rx", "plain", "'quoted", "a=b"]
    df = pd.DataFrame({"token": cells, "value": [-1.5] * len(cells)})
    raw = ui.csv_bytes(df, comments={"prompt": "=HYPERLINK(\"http://x\")\n=2+2,=3", "model": "m"}).decode()
    rows = list(csv.reader(io.StringIO(raw)))
    assert rows[0] == ['# prompt: =HYPERLINK("http://x")\\n=2+2,=3'] and rows[1] == ["# model: m"]
    body = rows[3:]
    assert [r[0] for r in body] == ["'=1+1", "'+SUM(A1)", "'-2+3", "'@cmd", "'\tx", "'\rx", "plain", "'quoted",
                                    "a=b"]
    assert all(r[1] == "-1.5" for r in body)                  # numbers stay numbers
    for line in raw.splitlines():
        assert not line.startswith(ui.FORMULA_START)


def test_every_csv_export_goes_through_the_helper():
    offenders = []
    for f in dashboard_sources():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "to_csv":
                offenders.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert len(offenders) == 1 and offenders[0].startswith("attnkit/app/exports.py:"), offenders   # inside csv_bytes
