"""Step by step's "Seed examples" tab: the seeds' worked examples with their numbers — the 4×4 causal example
and the three-token demo (X used as Q, K and V), then the seeds' Chinese sentences on the Chinese model, computed
live, and one click that opens each of the seeds' other claims on Chinese text.

Nothing here hard-codes a model number: every weight and probability shown comes from the loaded model.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attnkit import examples
from attnkit import steps as head_steps
from attnkit.app.caches import trace
from attnkit.app.context import Context
from attnkit.app.escaping import plain, show_error
from attnkit.app.navigation import open_page
from attnkit.app.pages.shared.next_token import next_token_frame, percent, pieces_note, predictions
from attnkit.app.pages.shared.texts import entropy_inputs
from attnkit.app.tables import show_table
from attnkit.app.tokens import show_spaces
from attnkit.charts import steps as step_charts
from attnkit.i18n import msg, nt, t
from attnkit.loading import CHINESE_MODEL, SHIPPED, training_tokens
from attnkit.standard import head_name

__all__ = ["ZH_CAT", "ZH_FOOD", "ZH_TEXT", "FOOD_WORDS", "FOOD_CLAIM", "seed_examples", "zh_examples", "zh_model_ready",
           "open_in_chinese"]

#: The seeds' Chinese sentences: the three-token demo, and the 上海 example (what comes after 吃了?).
ZH_CAT = "猫坐在垫子上"
ZH_FOOD = "我昨天在北京吃了烤鸭，今天在上海吃了"
#: The 上海 example's words, and the one the seed says matters most for what comes after 吃了.
FOOD_WORDS, FOOD_CLAIM = ("昨天", "北京", "上海"), "上海"
#: A longer Chinese text for the claims pages (ablations, entropy): the seeds' sentences in a row.
ZH_TEXT = ("小猫坐在垫子上，猫看着窗外。我昨天在北京吃了烤鸭，今天在上海吃了小笼包。注意力让每个词回头看看上下文："
           "查询、键和值都由可学习的矩阵投影而来，因果掩码盖住未来的词。小猫坐在垫子上，猫看着窗外。")


def zh_model_ready() -> bool:
    """True when the shipped Chinese model's folder is on disk."""
    return (SHIPPED[CHINESE_MODEL] / "config.json").is_file()


def open_in_chinese(page: str, prompt: str, **inputs) -> None:
    """A widget callback: load the Chinese model, type ``prompt`` in the sidebar and open ``page``."""
    st.session_state["ak_model"] = CHINESE_MODEL
    open_page(page, prompt=prompt, **inputs)


#: The claims a seed makes, each opened on its page with Chinese text on the Chinese model.
_LINKS = (("ablations", msg("V = X: is W_V needed?"), {"kind": "v=x"}),
          ("ablations", msg("W_K = W_Q: are two projections needed?"), {"kind": "wk=wq"}),
          ("ablations", msg("No 1/√d: is the scaling needed?"), {"kind": "no-scale"}),
          ("ablations", msg("No mask: is the causal mask needed?"), {"kind": "no-mask"}),
          ("entropy", msg("Does attention spread out as the context grows?"), {}),
          ("heatmaps", msg("Multi-head: every head of a layer"), {"view": "All heads of a layer"}))


def _links(ctx: Context) -> None:
    st.markdown("**" + t("The seeds' other claims, on Chinese text with {model}:", model=CHINESE_MODEL) + "**")
    cols = st.columns(3)
    for i, (page, label, inputs) in enumerate(_LINKS):
        inputs = {**inputs, **entropy_inputs(ctx)} if page == "entropy" else inputs
        cols[i % 3].button(str(label), key=f"st_zh_link{i}", on_click=open_in_chinese,  # internal text: _LINKS
                           args=(page, ZH_CAT if page == "heatmaps" else ZH_TEXT), kwargs=inputs)


def _patterns(ctx: Context, ids: list[int]) -> list:
    """Every layer's pattern [H, T, T] on ``ids`` (the page's cached run of them)."""
    tr = trace(ctx, capture=("pattern",), ids=ids)
    return [tr["pattern", layer][0].double().cpu() for layer in range(ctx.model.config.n_layers)]


def _cat_example(ctx: Context, layer: int) -> None:
    model = ctx.model
    ids = model.encode(ZH_CAT)
    tokens = model.token_texts(ids)
    pats = _patterns(ctx, ids)
    st.subheader(t("{sentence}: every head of layer {layer}", sentence=ZH_CAT, layer=layer))
    st.caption(nt("{model} reads the sentence as {n} token: {tokens}.",
                  "{model} reads the sentence as {n} tokens: {tokens}.", len(ids), model=plain(model.name),
                  tokens=plain(" | ".join(tokens))))
    labels = [f"{i} {show_spaces(tok)}" for i, tok in enumerate(tokens)]
    heads = pats[layer]
    cols = st.columns(min(4, heads.shape[0]))
    for h in range(heads.shape[0]):
        cols[h % len(cols)].altair_chart(step_charts.matrix_chart(heads[h], labels, labels, head_name(layer, h),
                                                                  digits=2, size=22, value_title=t("weight"),
                                                                  legend="bottom"), width="content")
    found = examples.cat_question(model.token_bytes(ids))
    if found is not None:
        q, sit, note = found
        st.caption(plain(str(note)))
        share = [float(heads[h, q, sit].sum()) for h in range(heads.shape[0])]
        best = max(range(len(share)), key=share.__getitem__)
        st.markdown(t(  # internal text: head names and percentages
            "From the last token of 垫子上 (position {q}), head {head} puts {w} of its attention on 坐 — the most of "
            "layer {layer}'s heads (the others: {others}).", q=q, head=head_name(layer, best), w=percent(share[best]),
            layer=layer, others=", ".join(f"{head_name(layer, h)} {percent(v)}" for h, v in enumerate(share)
                                          if h != best) or "—"))


def _food_example(ctx: Context) -> None:
    model = ctx.model
    ids = model.encode(ZH_FOOD)
    tokens = model.token_texts(ids)
    pats = _patterns(ctx, ids)
    st.subheader(t("{sentence} … which words does the last token look at?", sentence=ZH_FOOD))
    readings = examples.last_position_reading(pats, model.token_bytes(ids), FOOD_WORDS)
    rows = [{t("word"): w, t("positions"): ", ".join(map(str, readings[0].positions[w])) or "—",
             **{t("layer {layer}, mean of heads", layer=r.layer): percent(r.shares[w]) if r.positions[w] else "—"
                for r in readings}} for w in FOOD_WORDS]
    show_table(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(t("The seed says 上海 matters more than 昨天 and 北京 for what comes after 吃了; the table is the "
                 "attention of the last position on each word (the sum over the tokens that hold part of it, found "
                 "by their characters), from the model, in each of its {n} layers.", n=len(readings)))
    for r in readings:
        st.caption(plain(str(examples.reading_sentence(r, ids, tokens, FOOD_CLAIM, percent))))
    preds = predictions(model, ids)
    show_table(next_token_frame(preds), hide_index=True, width="content")
    pieces_note(preds)
    st.caption(plain(str(examples.answer_note(model.name, model.config.n_layers, training_tokens(model.name), preds,
                                              show_spaces(preds[0].shown), percent))))


def zh_examples(ctx: Context, layer: int = 0) -> None:
    """The seeds' examples in Chinese on the Chinese model (live), or the one click that loads it."""
    st.divider()
    if ctx.model_name != CHINESE_MODEL:
        if not zh_model_ready():
            st.info(t("The seeds' Chinese examples run on {model}, which is not installed here yet.",
                      model=CHINESE_MODEL), icon="ℹ️")
            return
        st.info(t("The seeds' examples are Chinese sentences; {current} was not trained on Chinese. "
                  "Load {model} with 猫坐在垫子上 to see them with its numbers.", current=plain(ctx.model_name),
                  model=CHINESE_MODEL), icon="🀄")
        st.button(t("Load {model} and show the Chinese examples", model=CHINESE_MODEL), key="st_zh_load",
                  on_click=open_in_chinese, args=("steps", ZH_CAT), type="primary")
        return
    try:
        _cat_example(ctx, min(layer, ctx.model.config.n_layers - 1))
        _food_example(ctx)
    except Exception as e:                   # never a traceback
        show_error(t("Could not compute the Chinese examples: {error}", error=f"{e.__class__.__name__}: {e}"))
    _links(ctx)


def seed_examples() -> None:
    """The seeds' 4×4 causal example and the three-token demo (X used as Q, K and V)."""
    st.subheader(t("The 4×4 example: every score row is [1, 2, 3, 4], plus the causal mask"))
    ex = head_steps.seed_causal_4x4()
    cols = st.columns(4)
    for col, (key, title, value) in zip(cols, (("scores", t("scores"), t("score")), ("mask", t("M (causal mask)"), "M"),
                                               ("masked", t("scores + M"), "s + M"),
                                               ("pattern", t("softmax(scores + M)"), t("weight")))):
        col.altair_chart(step_charts.matrix_chart(ex[key], title=title, digits=3, value_title=value, legend="bottom"),
                         width="content")
    st.caption(t("Row sums of the softmax: {sums}. The seed's rounded values: {seed}.",
                 sums=", ".join(f"{float(s):.6f}" for s in ex["pattern"].sum(-1)),
                 seed="1 · 0.269 0.731 · 0.090 0.245 0.665 · 0.032 0.087 0.237 0.644"))

    st.subheader(t("The three-token demo: X used directly as Q, K and V"))
    st.markdown(t("X's rows are the seed's '猫', '坐', '垫子上' (4 dimensions). As in the seed's code "
                  "(`scores = q·kᵀ / np.sqrt(d_k)`), the scores are divided by √d_k = √4 = 2. "
                  "The seed runs it without a mask; with the causal mask added, token 0 can only see itself."))
    names = ["0 猫", "1 坐", "2 垫子上"]
    dims = [f"d{j}" for j in range(4)]
    plain, causal = head_steps.seed_three_tokens(False), head_steps.seed_three_tokens(True)
    c = st.columns(2)
    rows_are = dict(row_title=t("token"), col_title=t("dimension"))       # X and the outputs: tokens × dimensions
    c[0].altair_chart(step_charts.matrix_chart(plain["X"], names, dims, "X (= Q = K = V)", **rows_are), width="content")
    c[1].altair_chart(step_charts.matrix_chart(plain["scores"], names, names, "X·Xᵀ / √4", value_title=t("score")),
                      width="content")
    for label, r in ((t("without mask"), plain), (t("with the causal mask"), causal)):
        c = st.columns(2)
        c[0].altair_chart(step_charts.matrix_chart(r["pattern"], names, names, t("softmax weights, {how}", how=label),
                                                   value_title=t("weight")), width="content")
        c[1].altair_chart(step_charts.matrix_chart(r["output"], names, dims, t("output = weights·V, {how}", how=label),
                                                   **rows_are), width="content")
