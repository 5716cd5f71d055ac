"""The atlas folder: one JSON a head, an index, a manifest, and one self-contained HTML file.

    DIR/heads/L2H1.json    one head's record (docs/atlas.md lists its fields)
    DIR/index.json         every head in one line: statistics' means, effect, verdicts
    DIR/manifest.json      model and its hash, corpus and its hash, command, versions, rules, float64 check
    DIR/atlas.html         the scatter, the head cards and the verdicts, in English and 简体中文; Vega, Vega-Lite
                           and vega-embed inlined (vl-convert-python's bundle), the data inlined, nothing fetched

Texts are stored in both languages ({"en": …, "zh": …}); the ``--json`` answer has them in the run's language.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import altair as alt
import numpy as np
import vl_convert as vlc                  # Vega, Vega-Lite and vega-embed, bundled for the HTML file (offline)

from ..atlas import LABEL_NAMES, LABELS, NO_FIRST, ROLE_NAMES, stat_column, stat_names
from ..atlas_result import AtlasResult, roles
from ..charts.atlas import axis_title, qk_chart, scatter, scatter_frame
from ..i18n import LANGUAGES, Message, current, language, t
from . import store

__all__ = ["write_atlas", "load_atlas", "plain", "render_json", "html_page", "SCRIPT", "MARKER", "KIND"]

MARKER, KIND = "manifest.json", "attnkit atlas"
SCRIPT = Path(__file__).with_name("atlas_page.js")


def plain(obj, lang: str | None = None):
    """JSON-ready: messages as {language: text} (or rendered in ``lang``), NaN/∞ as None, numpy as Python."""
    if isinstance(obj, Message):
        return obj.render(lang) if lang else {k: obj.render(k) for k in LANGUAGES}
    if isinstance(obj, dict):
        return {str(k): plain(v, lang) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v, lang) for v in obj]
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return None if not math.isfinite(x) else x
    if isinstance(obj, (np.integer, np.bool_)):
        return obj.item()
    return obj


def render_json(result: AtlasResult) -> dict:
    """The ``--json`` answer, texts in this context's language."""
    return plain(result.to_json(), current())


def _index(result: AtlasResult) -> list[dict]:
    """One row a head for the scatter: every statistic's mean (both ways), the effect, each role's verdict."""
    return plain([{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                  for row in result.to_pandas().to_dict("records")])


def write_atlas(result: AtlasResult, out) -> Path:
    """Write the atlas folder (see the module's doc) into ``out``; returns the HTML file's path."""
    out = Path(out)
    (out / "heads").mkdir(parents=True, exist_ok=True)
    for h in result.heads:
        store.write_json(out / "heads" / f"{h['head']}.json", plain(h))
    store.write_json(out / "index.json", {"heads": _index(result)})
    store.write_json(out / MARKER, plain({**result.info, "kind": KIND, "status": "complete"}))
    page = out / "atlas.html"
    store.write_atomic(page, lambda p: p.write_text(html_page(result), encoding="utf-8"))
    return page


def load_atlas(folder) -> AtlasResult:
    """An atlas folder read back (texts as {language: text} dicts)."""
    folder = Path(folder)
    info = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    if info.get("kind") != KIND:
        raise ValueError(f"{folder} is not an atlas folder")
    heads = [json.loads((folder / "heads" / f"{row['head']}.json").read_text(encoding="utf-8"))
             for row in json.loads((folder / "index.json").read_text(encoding="utf-8"))["heads"]]
    return AtlasResult(info, heads)


# ----------------------------------------------------------------------------- the HTML file

def _texts() -> dict:
    """Every text the page shows, in this context's language (from the catalog)."""
    return {
        "title": t("attnkit head atlas"), "x": t("x axis"), "y": t("y axis"), "colour": t("colour"),
        "role": t("verdicts of the role"), "no0": t("statistics without position 0"), "layer": t("layer"),
        "verdict": t("verdict"), "heads": t("heads"), "card_hint": t("Click a point, or open a head below."),
        "statistic": t("statistic"), "mean": t("mean"), "interval": t("95 % interval"), "windows": t("windows"),
        "quantiles": t("5th · 50th · 95th percentile"), "effect": t("effect of removing the head (nats/token)"),
        "role_col": t("role"), "score": t("score"), "threshold": t("threshold"), "pattern": t("pattern"),
        "effect_col": t("effect"), "yes": t("yes"), "no": t("no"),
        "examples": t("top examples by activation decile"), "decile": t("decile"), "activation": t("activation"),
        "pairs": t("top (query token, key token) pairs: the key each query attends most"), "query": t("query"),
        "key": t("key"), "count": t("count"), "mass": t("attention mass"),
        "qk": t("queries and keys in 2-D (principal axes)"), "f64": t("float64 check"),
        "f64_line": t("checked windows"), "max_error": t("largest |float32 − float64|"), "tolerance": t("tolerance"),
        "ok": t("passes"), "model": t("model"), "corpus": t("corpus"), "tokens": t("tokens"), "rules": t("rules"),
        "raises": t("removing it raises the loss"), "lowers": t("removing it lowers the loss"),
        "none": t("no effect beyond the margin"), "effect_sample": t("effect measured on"),
        "documents": t("documents"), "axis": t("axis {n} ({share} of the variance)"),
    }


def _strings() -> dict:
    """:func:`_texts` per language, with the statistics', axes' and verdicts' names."""
    out = {}
    for lang in LANGUAGES:
        with language(lang):
            out[lang] = _texts()
            out[lang]["roles"] = {r: str(ROLE_NAMES.get(r, r)) for r in stat_names()}
            out[lang]["roles"]["effect"] = t("effect of removing the head (nats/token)")
            out[lang]["labels"] = {v: str(LABEL_NAMES[v]) for v in LABELS}
            out[lang]["axes"] = {c: axis_title(c) for c in [*_axis_columns(), "effect"]}
    return out


def _axis_columns() -> list[str]:
    return [stat_column(s, nf) for nf in (False, True) for s in stat_names()]


def _specs(result: AtlasResult) -> dict:
    """The Vega-Lite specs the page starts from, per language and colouring (the page swaps axes and data)."""
    frame = scatter_frame(result.to_pandas(), "induction" if "induction" in roles() else roles()[0])
    out = {}
    for lang in LANGUAGES:
        with language(lang):
            out[lang] = {c: scatter(frame, "previous-token", "induction", c).to_dict() for c in ("verdict", "layer")}
            out[lang]["qk"] = qk_chart([{"x": 0.0, "y": 0.0, "kind": "query", "token": ""}], [0.5, 0.5]).to_dict()
    return out


def _bundle() -> str:
    version = alt.SCHEMA_VERSION.lstrip("v").rsplit(".", 1)[0]
    return vlc.javascript_bundle(vl_version=version)


def _script_json(obj) -> str:
    """JSON safe inside a <script> element (no "</" to end it early, no <!-- to open a comment)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False).replace("</", "<\\/").replace("<!--", "<\\!--")


def html_page(result: AtlasResult) -> str:
    """The atlas as one HTML file: scripts, styles and data inlined; nothing loaded from anywhere."""
    data = {"info": plain(result.info), "index": _index(result), "heads": [plain(h) for h in result.heads],
            "strings": _strings(), "specs": _specs(result), "roles": roles(), "columns": _axis_columns(),
            "no0": NO_FIRST}
    title = f"attnkit atlas · {result.info.get('model', {}).get('name', '')}".replace("<", "‹").replace("&", "+")
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline' "
            f"'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:\">\n"
            f"<title>{title}</title>\n<style>{CSS}</style>\n"
            f"<script>{_bundle()}</script>\n"
            f"<script type=\"application/json\" id=\"atlas-data\">{_script_json(data)}</script>\n"
            f"</head><body>\n<div id=\"app\"></div>\n<script>{SCRIPT.read_text(encoding='utf-8')}</script>\n"
            f"</body></html>\n")


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222;background:#fafafa}
header{padding:12px 20px;background:#fff;border-bottom:1px solid #ddd}
header h1{font-size:20px;margin:0 0 4px} .meta{color:#555;font-size:13px}
.lang button{margin-left:6px} .lang button.on{font-weight:bold}
main{display:flex;flex-wrap:wrap;gap:16px;padding:16px 20px} #left{flex:0 0 auto} #cards{flex:1 1 480px;min-width:420px}
.controls label{display:inline-block;margin:0 12px 6px 0} details.card{background:#fff;border:1px solid #ddd;
border-radius:6px;margin:0 0 8px;padding:4px 10px} details.card[open]{border-color:#888}
details.card>summary{cursor:pointer;font-weight:600} .badge{display:inline-block;font-size:11px;font-weight:500;
padding:1px 6px;border-radius:9px;margin-left:6px;color:#fff} table{border-collapse:collapse;margin:6px 0}
td,th{border-bottom:1px solid #eee;padding:2px 8px;text-align:left;font-size:12.5px;vertical-align:top}
.tok{white-space:pre;font-family:ui-monospace,monospace;border:1px solid #ddd;border-radius:3px;padding:0 2px;
margin:0 1px;display:inline-block} .tok.q{border-color:#d62728;border-width:2px} .ex{margin:3px 0 6px}
.bar{display:inline-block;background:#4c78a8;height:10px;vertical-align:middle} h4{margin:10px 0 2px;font-size:13px}
.text{margin:4px 0 8px}
"""
