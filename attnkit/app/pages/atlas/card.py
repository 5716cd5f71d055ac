"""The Atlas page's head card (its verdict per role, its effect with its interval, its top examples by activation
decile with the attended tokens marked, its top token pairs, its queries and keys in 2-D, and buttons to the pages
that look closer) and the head finder (every head ranked by a metric or a verdict). Tokens and texts from the
corpus are shown as plain text (``st.text`` and tables), never as Markdown or HTML."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attnkit.atlas import LABEL_NAMES, LABELS, ROLE_NAMES
from attnkit.atlas_result import roles, text_in
from attnkit.charts.atlas import axis_title, qk_chart
from attnkit.i18n import t
from attnkit.pieces import show_spaces
from attnkit.standard import parse_head
from attnkit.app.escaping import plain
from attnkit.app.navigation import open_head, open_page
from attnkit.app.tables import show_table
from attnkit.app.tokens import tokens_inline

__all__ = ["card", "finder", "example_text", "example_prompt", "rank_options", "rank_label"]


def _num(x, spec: str = "+.4f") -> str:
    return "—" if x is None else format(x, spec)


def _marked(pieces: list[str], start: int, marks: dict[int, str]) -> str:
    """Tokens from position ``start`` as one line (``tokens_inline``: a thin bar between tokens, spaces and breaks
    made visible), the token at each position of ``marks`` wrapped in its pair of marks."""
    return tokens_inline([f"{marks[start + i][0]}{p}{marks[start + i][1]}" if start + i in marks else p
                          for i, p in enumerate(pieces)])


def example_text(ex: dict) -> str:
    """One example as plain text: its context with the query «marked» and each attended key ⟦marked⟧, then one
    line per key (its weight, its position and the tokens around it)."""
    keys = {k["pos"]: "⟦⟧" for k in ex["keys"] if ex["start"] <= k["pos"] < ex["pos"]}
    lines = [t("query at position {pos}, activation {act}:", pos=ex["pos"], act=f"{ex['act']:.2f}"),
             "    … " + _marked(ex["pieces"], ex["start"], {**keys, ex["pos"]: "«»"})]
    for k in ex["keys"]:
        lines.append("    → " + t("key {pos}, weight {weight}:", pos=k["pos"], weight=f"{k['weight']:.3f}") + " "
                     + _marked(k["pieces"], k["start"], {k["pos"]: "⟦⟧"}))
    return "\n".join(lines)


def example_prompt(ex: dict, model) -> str:
    """An example's tokens as a prompt: joined as they are when the model's tokenizer reads them back as the same
    tokens (byte-level BPE: the pieces carry their spaces), else joined by spaces (word-level tokenizers)."""
    text = "".join(ex["pieces"])
    return text if model.token_texts(model.encode(text)) == list(ex["pieces"]) else " ".join(ex["pieces"])


def _buttons(h: dict, model) -> None:
    layer, head = parse_head(h["head"])
    top = next((d["examples"][0] for d in h["deciles"] if d["examples"]), None)
    a, b, c = st.columns(3)
    a.button(t("Open on Heatmaps"), key="at_open_heatmaps", on_click=open_head, args=(layer, head), width="stretch",
             help=t("The head's pattern on the sidebar's prompt."))
    b.button(t("Why (its top example)"), key="at_open_why", on_click=open_head, width="stretch",
             args=(layer, head, None if top is None else example_prompt(top, model)),
             help=t("Heatmaps on this head with its top example as the prompt: the query is the last token; click "
                    "a cell of its row for the panel that splits the score into what the query and the key are "
                    "made of."))
    inputs = {"recv_layer": layer, "recv_head": head} if layer >= 1 else {}
    c.button(t("Circuits"), key="at_open_circuits", on_click=open_page, args=("circuits",), kwargs=inputs,
             width="stretch", help=t("Circuits with this head as the receiver of path patching (layers ≥ 1)."))


def _verdicts(h: dict) -> None:
    yes, no = t("yes"), t("no")
    rows = [{t("role"): str(ROLE_NAMES.get(r["role"], r["role"])), t("score"): None if r["score"] is None else round(r["score"], 3),
             t("threshold"): r["threshold"], t("pattern"): yes if r["pattern"] else no,
             t("effect"): yes if r["effect"] else no, t("verdict"): str(LABEL_NAMES[r["verdict"]])}
            for r in h["roles"]]
    show_table(pd.DataFrame(rows), hide_index=True, width="stretch")


def _effect(h: dict) -> None:
    e = h["effect"]
    st.metric(t("Effect of removing it (nats/token)"), _num(e["value"]), help=t(
        "The next-token loss with the head mean-ablated (its output replaced by its corpus mean at every position) "
        "minus the loss without, per predicted token."))
    st.caption(plain(t("95 % interval {low} … {high}, on {tokens} tokens of {docs} documents.", low=_num(e["low"]),
                       high=_num(e["high"]), tokens=f"{e['tokens']:,}", docs=e["documents"])))
    for r in h.get("redundancy", []):
        st.caption(plain(text_in(r["text"])))


def _examples(h: dict) -> None:
    deciles = [d for d in h["deciles"] if d["examples"]]
    if not deciles:
        st.caption(t("No example was kept for this head."))
        return
    by = {d["decile"]: d for d in deciles}
    pick = st.select_slider(t("Activation decile (10: the strongest)"), options=sorted(by), value=max(by),
                            key="at_decile")
    d = by[pick]
    st.caption(plain(t("Activations {low} – {high} (the norm of what the head writes at the query). «»: the query; "
                       "⟦⟧: the keys it attends most; │ between tokens; ␣: a space; ↵: a line break.",
                       low=f"{d['low']:.2f}", high=f"{d['high']:.2f}")))
    st.text("\n\n".join(example_text(ex) for ex in d["examples"]))


def _pairs_and_qk(h: dict) -> None:
    left, right = st.columns([1, 1.2])
    left.markdown("**" + t("Top (query token, key token) pairs") + "**")
    pairs = pd.DataFrame([{t("query"): show_spaces(p["query"]), t("key"): show_spaces(p["key"]), t("count"): p["count"],
                           t("attention mass"): round(p["mass"], 3)} for p in h["pairs"]])
    show_table(pairs, on=left, hide_index=True, width="stretch")
    right.markdown("**" + t("Queries and keys in 2-D (principal axes)") + "**")
    qk = h["qk"]
    if qk["points"]:
        explained = [e if e is not None else float("nan") for e in qk["explained"]]
        right.altair_chart(qk_chart(qk["points"], explained).properties(height=280))   # room for a zh axis title


def card(h: dict, model) -> None:
    """One head's card (``h``: its record in the atlas folder; ``model``: the sidebar's, for the buttons)."""
    st.subheader(t("Head {head}", head=h["head"]))
    st.info(plain(text_in(h["summary"])), icon="🧭")
    _buttons(h, model)
    left, right = st.columns([1, 2])
    with left:
        _effect(h)
    with right:
        _verdicts(h)
    st.markdown("**" + t("Top examples by activation decile") + "**")
    _examples(h)
    _pairs_and_qk(h)
    f = h["float64"]
    st.caption(plain(t("Float64 check: {n} window(s), largest |float32 − float64| {err} (tolerance {tol}): {ok}.",
                       n=f["windows"], err=f"{max(f['max_error'], f['max_error_no_position_0']):.1e}",
                       tol=f"{f['tolerance']:g}", ok=t("within tolerance") if f["ok"] else t("outside tolerance"))))


# ----------------------------------------------------------------------------- the head finder

def rank_options(columns: list[str]) -> list[str]:
    """What the finder ranks by: the effect, every statistic (both ways), each role's verdict."""
    return ["effect", *columns, *[f"verdict: {r}" for r in roles()]]


def rank_label(option: str) -> str:
    if option.startswith("verdict: "):
        role = option[len("verdict: "):]
        return t("verdict: {role}", role=ROLE_NAMES.get(role, role))
    return axis_title(option)


def finder(df: pd.DataFrame, by: str) -> None:
    """Every head ranked by ``by`` (a column of ``AtlasResult.to_pandas()``): a verdict ranks "pattern and effect"
    first, then by the role's statistic; a metric ranks high to low."""
    out = df.copy()
    if by.startswith("verdict: "):
        role = by[len("verdict: "):]
        out["_order"] = out[by].map({v: i for i, v in enumerate(LABELS)})
        out = out.sort_values(["_order", role], ascending=[True, False])
        out[by] = out[by].map(lambda v: str(LABEL_NAMES.get(v, v)))
    else:
        out = out.sort_values(by, ascending=False, na_position="last")
    shown = out[["head", *([by] if by != "effect" else []), "effect", "effect_low", "effect_high"]]
    shown.columns = [t("head"), *([rank_label(by)] if by != "effect" else []), t("effect"), t("low"), t("high")]
    show_table(shown, hide_index=True, width="stretch", height=min(420, 38 + 35 * len(shown)))
