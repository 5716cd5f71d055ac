"""Exports: CSV (formula cells neutralised, metadata), PNG/SVG of a chart, JSON, a tensor as CSV, a folder as a zip."""
from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import streamlit as st
import torch

try:                                      # PNG/SVG export only; the buttons say so when it is missing
    import vl_convert as vlc
except ImportError:                       # pragma: no cover
    vlc = None

from .caches import budgeted
from .context import Context
from ..i18n import t

def _meta_frame(df: pd.DataFrame, meta: dict) -> pd.DataFrame:
    df = df.copy()
    for k, v in meta.items():
        df[k] = v
    return df


#: Cells a spreadsheet would run as a formula (OWASP "CSV injection"): they get a leading single quote.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    """A string cell starting with =, +, -, @, tab or CR, prefixed with ' so spreadsheets show it as text.
    Numbers stay numbers (a negative number is not a formula)."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_bytes(df: pd.DataFrame, comments: dict | None = None) -> bytes:
    """THE CSV export: every text cell and column name neutralised (see :func:`neutralise`), and optional
    ``# key: value`` comment lines first (each one quoted cell, line breaks shown as \\n)."""
    df = df.copy()
    df.columns = [neutralise(str(c)) for c in df.columns]
    for c in df.columns:
        if df[c].dtype == object or str(df[c].dtype) in ("string", "str"):
            df[c] = df[c].map(neutralise)
    buf = io.StringIO()
    if comments:
        w = csv.writer(buf, lineterminator="\r\n")
        for k, v in comments.items():
            w.writerow([f"# {k}: " + str(v).replace("\r", "\\r").replace("\n", "\\n")])
    df.to_csv(buf, index=False, lineterminator="\r\n")     # RFC 4180: a CR inside a cell is quoted too
    return buf.getvalue().encode("utf-8")


@budgeted
def _render(spec_json: str, fmt: str) -> bytes:
    if vlc is None:
        raise RuntimeError("vl-convert-python is not installed")
    if fmt == "svg":
        return vlc.vegalite_to_svg(spec_json).encode("utf-8")
    return vlc.vegalite_to_png(spec_json, scale=2)


def download_buttons(df: pd.DataFrame, chart=None, stem: str = "attnkit", meta: dict | None = None, key: str = ""):
    """CSV of the numbers (with model/prompt metadata columns), PNG and SVG of the chart.

    Every file is built only when its button is clicked.
    """
    meta = meta or {}
    with st.container(width=330):
        cols = st.columns(3)
        cols[0].download_button("CSV", lambda: csv_bytes(_meta_frame(df, meta)),
                                file_name=f"{stem}.csv", mime="text/csv", key=f"csv-{key}{stem}", on_click="ignore")
        if chart is None:
            return
        try:
            spec = chart.to_json()
            cols[1].download_button("PNG", lambda: _render(spec, "png"), file_name=f"{stem}.png",
                                    mime="image/png", key=f"png-{key}{stem}", on_click="ignore")
            cols[2].download_button("SVG", lambda: _render(spec, "svg"), file_name=f"{stem}.svg",
                                    mime="image/svg+xml", key=f"svg-{key}{stem}", on_click="ignore")
        except Exception as e:               # exports must never break the page
            cols[1].caption(t("picture export unavailable ({error})", error=e.__class__.__name__))


def meta_for(ctx: Context, **extra) -> dict:
    return {"model": ctx.model_name, "prompt": "all prompts" if ctx.all_selected else ctx.text[:500],
            "prepend_bos": ctx.prepend_bos, **extra}


def json_bytes(obj) -> bytes:
    return json.dumps(obj, indent=2, default=float).encode("utf-8")


def tensor_csv(t: torch.Tensor) -> bytes:
    return csv_bytes(pd.DataFrame(t.detach().cpu().float().numpy()))


def zip_bytes(folder, skip: tuple[str, ...] = (), root: str | None = None) -> bytes:
    """The regular files under ``folder`` as a zip that unpacks into one folder, ``root`` (default the folder's
    name); subfolders named in ``skip`` and links are left out."""
    folder = Path(folder)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(folder.rglob("*")):
            rel = f.relative_to(folder)
            if rel.parts[0] in skip or f.is_symlink() or not f.is_file():
                continue
            z.writestr(str(Path(root or folder.name) / rel), f.read_bytes())
    return buf.getvalue()
