"""Axes, legends and titles for every chart builder (Altair, no Streamlit): what the dashboard's Vega theme would
otherwise decide, and decide badly for attention charts.

* :func:`discrete_axis` — an axis of tokens (or any category): every label drawn. Streamlit's theme sets
  ``labelOverlap: true`` and ``labelLimit: 100``, so Vega silently drops labels whose boxes overlap (2 of 5
  tokens left on a small matrix) and cuts long ones; here none is dropped, and the label angle follows the
  room each label has.
* :func:`integer_axis` — an axis of an integer quantity (a position, a layer, a head): integer ticks only.
* :func:`colour_legend` — a continuous colour scale's legend as a column (or row) of colour squares from the
  low end to the high end, each labelled with its value. Not Vega's gradient: an SVG gradient is referenced by
  the page's address at drawing time (``url(<address>#gradient_0)``), and every page writes its inputs into
  the link, so a gradient drawn before the link changed shows its numbers but no colours.
* :func:`title_lines` — a title broken into lines that fit a width (a CJK character counts two columns), so a
  chart never shows a title cut short with "…".

Sizes are for :data:`CONTENT_WIDTH`, the page's content width at a 1280 px window with the sidebar open.
"""
from __future__ import annotations

import math
import textwrap
import unicodedata

import altair as alt
import numpy as np

__all__ = ["CONTENT_WIDTH", "LABEL_PX", "LABEL_CHAR_PX", "MIN_STEP", "char_columns", "discrete_axis", "integer_axis", "colour_legend",
           "legend_values", "title_lines", "text_px"]

#: px: the page's content width at a 1280 px window, sidebar open (960 at 1440): no chart's fixed width exceeds it.
CONTENT_WIDTH = 800
#: px: the longest axis label drawn whole (longer ones end in "…", their full text in the tooltip).
LABEL_PX = 140
#: px: one character column of an axis label (10 px sans-serif; a CJK character counts two).
LABEL_CHAR_PX = 6.0
#: px: the least room a label needs across its axis (9 px type, side by side on y, rotated on x).
MIN_STEP = 9


def char_columns(text: str) -> int:
    """Character columns ``text`` takes in a monospace font: East Asian wide/full-width characters
    (CJK, most emoji) count 2, combining marks and zero-width joiners 0, everything else 1."""
    n = 0
    for ch in text:
        if unicodedata.combining(ch) or ch in "\u200b\u200c\u200d\ufe0f":
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def text_px(text: str, px: float = LABEL_CHAR_PX) -> float:
    """Roughly how wide ``text`` is drawn: ``px`` per column, wide (CJK, full-width) characters two columns."""
    return char_columns(str(text)) * px


def discrete_axis(title, labels=None, step: float | None = None, *, x: bool = True, angle: int | None = None,
                  limit: int = LABEL_PX, **kw) -> alt.Axis:
    """An axis of categories (tokens, heads, parts) on which Vega hides no label (``labelOverlap`` off).

    ``labels`` (in axis order) and ``step`` (px per category) size the labels: 10 px type, 9 px below 11 px a
    step; horizontal on the x axis when every label fits its step, else vertical (``angle`` overrides). Below
    :data:`MIN_STEP` px a step not even a vertical label fits: then every k-th label is drawn, chosen here (the
    same ones every time, each cell's token in its tooltip), not dropped by Vega. ``limit``: the longest label
    in px (longer ones end in "…")."""
    font = 10 if step is None or step >= 11 else 9
    if angle is None:
        widest = max((text_px(v) for v in labels), default=0) if labels is not None else math.inf
        angle = 0 if not x or (step is not None and widest + 4 <= step) else -90
    opts = dict(title=title, labelOverlap=False, labelLimit=limit, labelAngle=angle, labelFontSize=font)
    if labels is not None and step is not None and step < MIN_STEP:
        opts["values"] = list(labels)[:: math.ceil(MIN_STEP / step)]
    return alt.Axis(**(opts | kw))


def integer_axis(title, values=None, **kw) -> alt.Axis:
    """An axis of an integer quantity: ticks at integers only (``values``: exactly these), no decimals."""
    if values is not None:
        kw["values"] = [int(v) for v in values]
    return alt.Axis(title=title, tickMinStep=1, format="d", **kw)


def legend_values(domain, n: int = 5, scale: str = "linear") -> list[float]:
    """``n`` values from the low end of ``domain`` to its high end (log: evenly spaced in the logarithm)."""
    lo, hi = (float(v) for v in domain)
    if scale == "log" and lo > 0 and hi > lo:
        return [float(v) for v in np.geomspace(lo, hi, n)]
    if hi == lo:
        return [lo]
    return [float(v) for v in np.linspace(lo, hi, n)]


def _number_format(values: list[float], scale: str, signed: bool) -> str:
    """A d3 number format for legend values: the fewest decimals that show each value to within 5 % of the step
    between them (trailing zeros trimmed: 0, 0.5, 1; 1, 2.5, 4); two significant digits on a log scale."""
    if scale == "log":
        return ".2~g"
    step = (max(values) - min(values)) / (len(values) - 1) if len(values) > 1 else abs(values[0]) or 1.0
    digits = max(0, -math.floor(math.log10(step)))
    while digits < 6 and any(abs(round(v, digits) - v) > 0.05 * step for v in values):
        digits += 1
    return ("+" if signed else "") + f".{digits}~f"


def colour_legend(title, domain=None, *, scale: str = "linear", n: int = 5, orient: str = "right",
                  values=None, fmt: str | None = None, **kw) -> alt.Legend:
    """The legend of a continuous colour scale: ``n`` colour squares from ``domain``'s low end to its high end
    (the high end on top, or on the right), each labelled with its value, under ``title``; without ``domain``
    (a scale whose domain the browser computes) Vega picks about five values of it.

    ``values``: exactly these instead; ``fmt``: their number format (default: enough digits to tell them
    apart, signed when the domain spans 0). ``orient="top"``/``"bottom"``: one row beside the title."""
    vals = list(values) if values is not None else legend_values(domain, n, scale) if domain is not None else None
    opts = dict(type="symbol", symbolType="square", symbolSize=170, symbolStrokeWidth=0.5,
                symbolStrokeColor="#bbbbbb", symbolOpacity=1, symbolFillColor=None, rowPadding=0,
                columnPadding=2, labelOffset=4, titleLimit=0, labelLimit=0, orient=orient)
    across = orient in ("top", "bottom")
    if across:
        opts |= {"direction": "horizontal", "titleOrient": "left" if orient == "top" else "top",
                 "columns": len(vals) if vals else 8}
    if vals is not None:
        opts["format"] = fmt or _number_format(vals, scale, min(vals) < 0 < max(vals))
        opts["values"] = vals if across else vals[::-1]        # the high end on top, as on a colour bar
    elif fmt:
        opts["format"] = fmt
    opts = {k: v for k, v in opts.items() if v is not None}
    return alt.Legend(title=title, **(opts | kw))


def title_lines(text, width: int = CONTENT_WIDTH, px: float = 7.5) -> list[str]:
    """``text`` broken into lines of at most ``width`` px (``px`` per column, a CJK character two): a chart's
    title that never ends in "…"."""
    text = str(text)
    columns = max(8, int(width // px))
    if text_px(text, px) <= width:
        return [text]
    lines, line = [], ""
    for piece in _pieces(text):
        if line and text_px(line + piece, px) > width:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
    lines.append(line.rstrip())
    return [x for chunk in lines for x in (textwrap.wrap(chunk, columns) if text_px(chunk, px) > width else [chunk])]


def _pieces(text: str) -> list[str]:
    """Break points of a title: after each space, and between any two CJK characters."""
    out, cur = [], ""
    for ch in text:
        cur += ch
        if ch == " " or ord(ch) >= 0x2E80:
            out.append(cur)
            cur = ""
    return out + ([cur] if cur else [])
