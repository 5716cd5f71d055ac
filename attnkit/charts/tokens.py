"""The prompt as text, coloured by attention: a token-centred view (like CircuitsVis's or BertViz's).

* :func:`wrap_tokens` — the layout: tokens placed on lines of at most ``budget`` character columns
  (wide CJK/emoji characters count two, a token's leading space is the gap before it, a line break
  inside a token ends the line). Pure Python, no Streamlit, no Altair.
* :func:`token_chart` — an Altair chart of that layout: each token a text mark on a coloured
  rectangle; clicking a token (or, with ``follow="hover"``, pointing at it) makes it the *focus*,
  and every other token is coloured by how much the focus attends to it (``direction="to"``) or how
  much it attends to the focus (``direction="from"``). All in the browser (a Vega selection
  parameter drives a calculated field), no custom HTML or JavaScript; token text is drawn as text
  by Vega, never interpreted as HTML or Markdown.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..i18n import t
from .axes import char_columns, colour_legend
from .colours import SCHEME_ENDS
from .heatmaps import LOG_DECADES

__all__ = ["TOKEN_LIMIT", "CHAR_PX", "LINE_PX", "char_columns", "display_token", "wrap_tokens", "token_chart",
           "FOCUS_COLOR", "SCALES", "scale_caption"]

TOKEN_LIMIT = 512        # the view sends a T×T table to the browser: ordinary prompt lengths only
CHAR_PX = 7.83           # one character column of a 13 px monospace font (0.602 em)
LINE_PX = 26
FONT = "DejaVu Sans Mono, Menlo, Consolas, Noto Sans Mono CJK SC, monospace"
FOCUS_COLOR = "#d62728"
FUTURE_TEXT = "#a0a0a0"
SCALES = ("linear", "sqrt", "log")


def display_token(tok: str) -> tuple[bool, str]:
    """(has a leading space, the text to draw): one leading space becomes the gap before the token;
    line breaks, tabs and further spaces are drawn as ↵ ⇥ ␣ (an empty token as ∅)."""
    lead = tok.startswith(" ")
    body = tok[1:] if lead else tok
    body = body.replace("\n", "↵").replace("\r", "").replace("\t", "⇥").replace(" ", "␣")
    return lead, body or ("" if lead else "∅")


def _spans(tokens: list[str], groups) -> list[tuple[int, int, str]]:
    """(start, end, text) of each drawn unit: a token, or a character split over tokens (``groups``)."""
    if groups is None:
        return [(i, i + 1, t) for i, t in enumerate(tokens)]
    spans = [(int(g.start), int(g.end), str(g.text)) for g in groups]
    if [p for a, b, _ in spans for p in range(a, b)] != list(range(len(tokens))):
        raise ValueError("groups must cover the tokens once, in order")
    return spans


def wrap_tokens(tokens: list[str], budget: int = 110, groups=None) -> pd.DataFrame:
    """Lay tokens out as running text on lines of at most ``budget`` columns.

    One row per token: ``pos``, ``text`` (what is drawn), ``line`` (0-based), ``x0``/``x1`` (first and
    one-past-last column of its box). A token with a leading space starts one column after the
    previous one (the space); a token holding a line break ends its line; a token that does not fit
    starts a new line; a token longer than a whole line is cut to it with "…".

    ``groups`` (:func:`attnkit.pieces.char_groups`): a character split over k byte-level tokens is
    drawn once — its first token carries the text, the k boxes share its width — and ``group`` names
    the span (``"3–4"``), empty for a whole token."""
    rows, line, col = [], 0, 0
    for start, end, tok in _spans(tokens, groups):
        lead, text = display_token(tok)
        w = char_columns(text)
        if w > budget:
            while text and char_columns(text) > budget - 1:
                text = text[:-1]
            text, w = text + "…", char_columns(text) + 1
        gap = 1 if lead and col > 0 else 0
        if col > 0 and col + gap + w > budget:
            line, col, gap = line + 1, 0, 0
        x0, k, width = col + gap, end - start, max(w, 1)
        for j in range(k):
            rows.append({"pos": start + j, "text": text if j == 0 else "", "line": line,
                         "x0": x0 + width * j / k, "x1": x0 + width * (j + 1) / k,
                         "group": f"{start}–{end - 1}" if k > 1 else ""})
        col = x0 + width
        if "\n" in tok:
            line, col = line + 1, 0
    return pd.DataFrame(rows, columns=["pos", "text", "line", "x0", "x1", "group"])


def _token_frame(A: np.ndarray, tokens: list[str], lay: pd.DataFrame, direction: str,
                 ids: list[int] | None = None) -> pd.DataFrame:
    """One row per token: its layout, column w{i} = its weight when token i is the focus, and box paddings."""
    T = len(tokens)
    M = A.T if direction == "to" else A
    M = np.where(np.isfinite(M), np.round(M, 5), 0.0).astype(np.float32)
    df = pd.concat([lay, pd.DataFrame(M, columns=[f"w{i}" for i in range(T)])], axis=1)
    shown = {}
    for p, t, g in zip(lay["pos"], lay["text"], lay["group"]):      # a split character: its text on every piece
        shown[p] = shown[p - 1] if (g and not t) else t
    df["token"] = [f"{p}: {shown[p]}" for p in lay["pos"]]
    pieces = [tokens[p].replace(" ", "␣") + (f" (id {ids[p]})" if ids is not None else "") for p in range(T)]
    df["pieces"] = [_group_pieces(g, pieces) for g in lay["group"]]
    # a box reaches into the gap beside it (a space, the line's end), not into a neighbouring sub-word
    nxt = list(zip(lay["line"], lay["x0"]))[1:] + [(-1, 0)]
    first = [not g or g.startswith(f"{p}–") for p, g in zip(lay["pos"], lay["group"])]
    df["pad_l"] = np.where([x == 0 or (f and tokens[p].startswith(" "))
                            for p, x, f in zip(lay["pos"], lay["x0"], first)], 0.35, 0.03)
    df["pad_r"] = np.where([nl != ln or nx > x1 for (nl, nx), ln, x1 in zip(nxt, lay["line"], lay["x1"])], 0.35, 0.03)
    return df


def _group_pieces(group: str, pieces: list[str]) -> str:
    """The byte-level pieces (and ids) of a split character, e.g. "3–4: \\xe5\\xba (id 871) + \\x8a (id 233)"."""
    if not group:
        return ""
    a, b = (int(x) for x in group.split("–"))
    return f"tokens {group}: " + " + ".join(pieces[a: b + 1])


#: The token view's colour scheme (its colour words: :data:`attnkit.charts.heatmaps.SCHEME_ENDS`).
SCHEME = "oranges"


def scale_caption(scale: str) -> str:
    """How the token view's colours follow the weight under ``scale`` (the words match the control and the
    scheme drawn)."""
    low, high = (str(w) for w in SCHEME_ENDS[SCHEME])
    return _scale_words(scale) + t(" Low weights are {low}, high ones {high}.", low=low, high=high)


def _scale_words(scale: str) -> str:
    if scale == "log":
        return t("Colours: log scale — logarithmic in the weight, from 1/{floor} of the chosen token's largest "
                 "weight (smaller weights take the lowest colour) up to that largest weight (the chosen token itself "
                 "left out; the legend shows the range).", floor=f"{10 ** LOG_DECADES:,}")
    if scale == "sqrt":
        return t("Colours: square-root scale — the square root of the weight, from 0 to the largest weight of the "
                 "chosen token (itself left out; the legend shows the range).")
    return t("Colours: linear scale — linear in the weight, from 0 to the largest weight of the chosen token (itself "
             "left out; the legend shows the range).")


def _focus_selections(name: str, focus: int, follow: str) -> tuple[list, str]:
    """(selection parameters, Vega expression of the focus position): the clicked token, or with
    ``follow="hover"`` the hovered one, back to the clicked one when the pointer leaves."""
    pick = alt.selection_point(name=f"{name}_pick", fields=["pos"], on="click", clear=False,
                               value=[{"pos": focus}])
    params = [pick]
    f_expr = f"(isValid({name}_pick.pos) ? {name}_pick.pos[0] : {focus})"
    if follow == "hover":
        hover = alt.selection_point(name=f"{name}_hover", fields=["pos"], on="pointerover", clear="pointerout")
        params.append(hover)
        f_expr = f"(isValid({name}_hover.pos) ? {name}_hover.pos[0] : {f_expr})"
    return params, f_expr


def _token_base(df: pd.DataFrame, f_expr: str, seen: str, scale: str) -> alt.Chart:
    """The chart's data with the focus, each token's weight and shade, its box and whether its text is dark."""
    return alt.Chart(df).transform_calculate(
        focus=f_expr,
    ).transform_calculate(
        seen=seen, is_focus="datum.pos == datum.focus",
        weight=f"datum['w' + datum.focus]",
        shade=f"datum.pos == datum.focus ? 0 : datum['w' + datum.focus]",
        bx0="datum.x0 - datum.pad_l", bx1="datum.x1 + datum.pad_r", y0="datum.line + 0.1", y1="datum.line + 0.9",
        ty="datum.line + 0.5",
    ).transform_joinaggregate(top="max(shade)").transform_calculate(
        dark="datum.seen && !datum.is_focus && datum.top > 0 && "
             + {"linear": "datum.shade > 0.55 * datum.top", "sqrt": "datum.shade > 0.3 * datum.top",
                "log": f"datum.shade > datum.top * pow(10, -{LOG_DECADES} * 0.4)"}[scale],
        # log: weights under 10^-LOG_DECADES of the top take the lowest colour (a log scale cannot hold 0)
        lshade=f"max(datum.shade, max(datum.top, 1e-12) * pow(10, -{LOG_DECADES}))",
    )


def _colour(scale: str, wname: str) -> dict:
    """The boxes' colour: the focus red, tokens it cannot see white, the rest by weight under ``scale``."""
    vscale = alt.Scale(scheme=SCHEME, type="log", nice=False) if scale == "log" else \
        alt.Scale(scheme=SCHEME, type=scale, zero=True, nice=False)
    colour = alt.Color("lshade:Q" if scale == "log" else "shade:Q", title=wname, scale=vscale,
                       legend=colour_legend(wname, orient="top", fmt="~g" if scale == "log" else ".2f"))
    return {**colour.to_dict(), "condition": [{"test": "datum.is_focus", "value": FOCUS_COLOR},
                                              {"test": "!datum.seen", "value": "#ffffff"}]}


def token_chart(weights: np.ndarray, tokens: list[str], *, direction: str = "to", focus: int | None = None,
                follow: str = "click", scale: str = "sqrt", budget: int = 100, title: str = "",
                name: str = "tok", groups=None, ids: list[int] | None = None) -> alt.LayerChart:
    """The prompt as wrapped text; the focus token's attention colours the others.

    ``weights``: [T, T] attention (rows queries, columns keys; a head's pattern, or a mean/max over
    heads). ``direction="to"``: token j is coloured by weights[focus, j] (how much the focus attends
    to j; tokens after the focus cannot be attended to and are greyed). ``direction="from"``: token j
    is coloured by weights[j, focus] (how much j attends to the focus; tokens before it are greyed).
    ``focus``: the token chosen at first (default the last). ``follow``: ``"click"`` (a click chooses
    the focus, hovering shows a token's weight in its tooltip) or ``"hover"`` (the focus follows the
    pointer, back to the clicked one when it leaves the text). ``scale``: ``"linear"``, ``"sqrt"`` or
    ``"log"``; the colours run from 0 (log: from 10^-LOG_DECADES of it) to the largest weight of the
    current focus, which the legend shows. ``groups`` (:func:`attnkit.pieces.char_groups`): a character
    split over byte-level tokens is drawn once across its tokens; the tooltip names its pieces and
    their ``ids``.
    ``name``: the prefix of the selection parameters (``{name}_pick``, ``{name}_hover``)."""
    A = np.asarray(weights, dtype=np.float32)
    T = len(tokens)
    if A.shape != (T, T):
        raise ValueError(f"weights are {A.shape}, tokens {T}: need a [T, T] matrix")
    if T > TOKEN_LIMIT:
        raise ValueError(f"{T} tokens: the token view is for at most {TOKEN_LIMIT}")
    if direction not in ("to", "from"):
        raise ValueError("direction is 'to' or 'from'")
    if scale not in SCALES:
        raise ValueError(f"scale is one of {', '.join(SCALES)}")
    focus = T - 1 if focus is None else int(focus)
    lay = wrap_tokens(tokens, budget, groups)
    df = _token_frame(A, tokens, lay, direction, ids)
    params, f_expr = _focus_selections(name, focus, follow)
    seen = "datum.pos <= datum.focus" if direction == "to" else "datum.pos >= datum.focus"
    n_lines = int(lay["line"].max()) + 1 if T else 1
    width = int(np.ceil(budget * CHAR_PX)) + 8
    xs = alt.Scale(domain=[-0.5, budget + 0.5], nice=False, zero=False)
    ys = alt.Scale(domain=[0, n_lines], nice=False, zero=False, reverse=True)
    wname = t("weight from the chosen token") if direction == "to" else t("weight to the chosen token")
    base = _token_base(df, f_expr, seen, scale)
    tips = [alt.Tooltip("token:N", title=t("token")), alt.Tooltip("weight:Q", title=wname, format=".4f")]
    if df["pieces"].astype(bool).any():
        tips.append(alt.Tooltip("pieces:N", title=t("byte-level pieces")))
    colour_enc = _colour(scale, wname)
    boxes = base.mark_rect(cornerRadius=3, stroke="#e4e4e4", strokeWidth=0.5, cursor="pointer").encode(
        x=alt.X("bx0:Q", scale=xs, axis=None), x2="bx1:Q",
        y=alt.Y("y0:Q", scale=ys, axis=None), y2="y1:Q",
        color=colour_enc, tooltip=tips)
    text = base.mark_text(align="left", baseline="middle", font=FONT, fontSize=13, cursor="pointer").encode(
        x=alt.X("x0:Q", scale=xs, axis=None), y=alt.Y("ty:Q", scale=ys, axis=None), text="text:N",
        color={"condition": [{"test": "datum.is_focus || datum.dark", "value": "#ffffff"},
                             {"test": "!datum.seen", "value": FUTURE_TEXT}], "value": "#1a1a1a"},
        tooltip=tips)
    for p in params:
        boxes = boxes.add_params(p)
        text = text.add_params(p)
    return alt.layer(boxes, text, title=title).properties(
        width=width, height=n_lines * LINE_PX, autosize=alt.AutoSizeParams(type="pad", contains="padding"),
    ).configure_view(stroke=None)
