"""Entropy versus context length: does attention spread out as the context grows?"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attnkit import entropy as entropy_lib
from attnkit import app as ui
from attnkit.app.pages.entropy import runs as entropy_runs
from attnkit.app.pages.entropy import texts as entropy_texts
from attnkit.charts import entropy as entropy_charts
from attnkit.i18n import msg, punctuation, status_label, t
from attnkit.standard import head_name

SPLITS = ["split into windows", "first window only"]
FACTORS = ["max(1, log_b(i+1))", "log_b(i+1)"]
SPLIT_NAMES = dict(zip(SPLITS, (msg("split into windows"), msg("first window only"))))


@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys ent_*, URL parameters by field name)."""

    prefix = "ent"
    text: str = entropy_texts.PROMPT     # or a shipped text (attnkit.loading.shipped_texts)
    split: str = SPLITS[0]
    window: int = ui.param(0)            # the model's context
    max_docs: int = 200
    layers: list[int] = ui.param(None)  # every layer
    head: str = "mean"
    logx: bool = True
    log_on: bool = False
    log_base: float = 0.0                # a quarter of the longest document, within 2…64
    log_mode: str = FACTORS[0]
    cmp_layers: list[int] = ui.param(None)
    no_first: bool = False               # position 0 (the attention sink) taken out


ctx = ui.page("entropy")
cfg = ctx.model.config
L, H = cfg.n_layers, cfg.n_heads

# Inputs survive a change of model: keep them valid for this one (before the widgets are drawn).
ss = st.session_state
state = Inputs.load(window=cfg.n_ctx, layers=list(range(L)), cmp_layers=[0, L - 1] if L > 1 else [0])
if not 2 <= state.window <= cfg.n_ctx:
    state.fit("window", [cfg.n_ctx], cfg.n_ctx, what=t("Window"),
              because=t("the model's context is {n} tokens", n=cfg.n_ctx))
state.fit("max_docs", range(1, 2001), 200, what=t("At most this many documents"), because=t("1 to 2,000"))
state.fit("split", SPLITS, SPLITS[0], what=t("Long texts"), because=t("not one of the choices"))
state.fit("log_mode", FACTORS, FACTORS[0], what=t("Factor"), because=t("not one of the choices"))
state.fit_many("layers", range(L), list(range(L)), what=t("Layers"), because=t("the model has {n} layers", n=L))
state.fit_many("cmp_layers", range(L), [0, L - 1] if L > 1 else [0], what=t("Layers to compare"),
               because=t("the model has {n} layers", n=L))
state.fit("head", ["mean"] + [str(h) for h in range(H)], "mean", what=t("Head"),
          because=t("the model has {n} heads", n=H), basis=ctx.model_name)

st.markdown(t(
    "**The seed's claim, in short:** the longer the context, the more terms share each softmax's mass; "
    "attention therefore spreads out (its entropy rises) and it gets harder to single out the tokens that "
    "matter — one reason long contexts and running past the training length are hard.\n\n"
    "**How it is measured here:** for query position *i* the entropy is $H_i = -\\sum_{j \\le i} a_{ij} \\ln a_{ij}$ "
    "(nats) over its n visible keys (n = i + 1, or min(i + 1, w) on a layer with a sliding window of w keys); "
    "uniform attention reaches the bound ln n, and the normalised entropy is H / ln n. Under the causal mask query *i* sees "
    "exactly the prefix it would see if the text ended there, so **one forward pass of T tokens gives the curve "
    "for every length up to T**. A head whose entropy grows like ln n (slope 1 against ln n) spreads out as the "
    "claim says; slope 0 means it keeps the same focus however long the context.\n\n"
    "The numbers are computed block by block with a running log-sum-exp (attnkit.streaming): no T × T pattern "
    "is ever held, so a long text runs up to the model's whole context (thousands of tokens on long-context "
    "models); the bar moves layer by layer, and changing a widget meanwhile interrupts the run."
))


def verdict(s, current: str):
    """The seed's claim checked: the verdict, its reason (with what would settle it, as one click), and what the
    slope measures."""
    verdict, why = entropy_lib.claim_check(s, cfg.n_ctx)
    st.subheader(t("Does the measurement support it?"))
    icon = {"supported": "✅", "not enough evidence": "➗", "not supported": "❌"}.get(verdict, "❔")
    st.markdown(icon + " " + t("On **{model}** with these {n} document(s): **{verdict}**. {why}",
                               model=ui.plain(ctx.model_name), n=s.n_docs, verdict=status_label(verdict), why=why))
    if verdict == "not enough evidence":
        entropy_texts.settle(ctx, s, current)
    elif s.T < 64:
        st.caption(t("Only {n} positions: a short basis for a claim about long contexts — upload a long text (it is "
                     "split into windows of the context) for a firmer answer.", n=s.T))
    st.caption(t("Mind what the slope measures: a random or untrained model attends almost uniformly (slope ≈ 1) "
                 "without any 'difficulty'; a trained model that holds its focus (slope ≈ 0, sinks, previous-token "
                 "heads) is a counterexample to the claim for that head."))


def curves(s, layers: list, head_i, log_x: bool):
    """Entropy and normalised entropy against context length, per layer."""
    if not layers:
        st.info(t("Pick at least one layer."))
    else:
        band_note = (t("band: mean ± 1 std across documents (where ≥ 2 documents reach that length)") if s.n_docs > 1
                     else t("one document: no spread band (upload several prompts or a long text)"))
        df = entropy_lib.curve_frame(s, "entropy", head_i, layers)
        ch = entropy_charts.curves(df, t("entropy H (nats)"), log_x=log_x)
        st.altair_chart(ch, width="stretch")
        st.caption(t("Dashed: ln n, the entropy of uniform attention over the n visible keys. {band}. {drawn} of {T} "
                     "positions drawn.", band=band_note, drawn=df['n'].nunique(), T=s.T))
        ui.download_buttons(df, ch, stem="entropy_vs_length", meta=meta, key="ent1")

        st.subheader(t("Normalised entropy H / ln n"))
        dfn = entropy_lib.curve_frame(s, "entropy", head_i, layers, normalised=True)
        chn = entropy_charts.curves(dfn, t("H / ln n (1 = uniform)"), bound=t("1 = uniform"), log_x=log_x)
        st.altair_chart(chn, width="stretch")
        st.caption(t("Position 0 is left out: a single visible key has no spread (0/0). A falling curve means the "
                     "head spreads more slowly than the number of keys grows."))
        ui.download_buttons(dfn, chn, stem="normalised_entropy", meta=meta, key="ent2")


def beside_corpus(layers: list, head_i, log_x: bool):
    """The same curves over a corpus, with intervals."""
    with st.expander(t("Beside a corpus: the same curves over many documents, with 95 % intervals")):
        corpus = ui.corpus_result("ent_corpus")
        if corpus is not None and layers:
            try:
                dfc = corpus.curve("entropy", head_i, layers)
            except KeyError as e:
                st.info(str(e).strip("'\""))  # internal text: the corpus module's message
            else:
                chc = entropy_charts.curves(dfc, t("entropy H (nats), corpus"), log_x=log_x)
                st.altair_chart(chc, width="stretch")
                st.caption(t("Corpus: {n} documents; band: 95 % bootstrap interval over documents (the curves above "
                             "are this input's). Dashed: ln n.", n=f"{len(corpus.documents):,}"))
                ui.download_buttons(dfc, chc, stem="corpus_entropy_vs_length", meta=meta, key="ent-corpus")


def slopes_and_sinks(s, layers: list, head_i, log_x: bool):
    """The slope map of H against ln(i+1), and the first-token mass (attention sink)."""
    left, right = st.columns(2)
    with left:
        st.subheader(t("Slope of H against ln(i+1)"))
        sf = entropy_lib.slope_frame(s)
        if sf["slope"].isna().all():
            st.info(t("A slope needs at least 3 tokens (two positions i ≥ 1); this input is too short."))
        else:
            chs = entropy_charts.slope_map(sf)
            st.altair_chart(chs, width="stretch")
            st.caption(t("Least squares over positions i ≥ 1 of the mean entropy curve. 1: spreads like uniform "
                         "attention; 0: the same focus at every length; negative: sharpens with length."))
            ui.download_buttons(sf, chs, stem="entropy_slopes", meta=meta, key="ent3")
        with st.expander(t("Slope table")):
            ui.show_table(sf, hide_index=True, width="stretch")
    with right:
        st.subheader(t("First-token mass (attention sink)"))
        if state.no_first:
            st.info(t("Position 0 is excluded: there is no first-token mass to draw."))
        elif layers:
            dff = entropy_lib.curve_frame(s, "first_token", head_i, layers)
            chf = entropy_charts.curves(dff, t("attention on position 0"), bound=None, log_x=log_x)
            st.altair_chart(chf, width="stretch")
            st.caption(t("a_i0 per position: heads that park their mass on the first token keep a low entropy "
                         "however long the context."))
            ui.download_buttons(dff, chf, stem="first_token_mass", meta=meta, key="ent4")


def log_length_run(s):
    """The log-length factor's settings, and the measurement with it (None while it runs)."""
    c1, c2 = st.columns(2)
    if not 1.5 <= state.log_base <= 1e6:
        auto = float(min(64, max(2, s.T // 4)))
        if state.log_base != 0.0:            # 0: not chosen yet; anything else came from a link
            ui.notice(t("Base b changed from {old:g} to {new:g}: it must lie between 1.5 and 1,000,000.",
                        old=state.log_base, new=auto))
        state.set("log_base", auto)
    base = float(c1.number_input(t("Base b"), min_value=1.5, max_value=1e6, step=1.0, key="ent_log_base",
                                 help=t("The factor passes 1 at n = b keys.")))
    clamp = c2.radio(t("Factor"), FACTORS, key="ent_log_mode",
                     help=t("max(1, ·) leaves the first b − 1 positions exactly as trained and sharpens only "
                            "beyond; the raw factor also flattens positions before b.")) == FACTORS[0]
    if clamp and base >= s.T:
        st.info(t("With b = {b} ≥ {T} positions the factor is 1 everywhere: the model is unchanged (the comparison "
                  "below shows identical numbers). Lower b to see an effect.", b=f"{base:g}", T=s.T))
    elif not clamp and base > s.T:
        st.info(t("With the raw factor and b = {b} > {T} positions every factor is below 1: every query is "
                  "flattened, a strong change to a model trained without it.", b=f"{base:g}", T=s.T))
    try:
        s2 = entropy_runs.summary(ctx, docs, base, clamp, label=t("Measuring with log-length scaling"),
                                  slot="ent_log", no_first=state.no_first)
    except (ValueError, RuntimeError) as e:
        ui.show_error(t("Could not run the intervention: {error}", error=str(e)))
        ui.stop()
    return base, clamp, s2


def log_length_results(s, s2, base: float, clamp: bool, head_i, log_x: bool):
    """The unmodified and the scaled model compared: loss, slopes, curves, loss per length."""
    ui.show_table(pd.DataFrame({
        t("model"): [t("unmodified"), t("log-length (b = {b})", b=f"{base:g}")],
        t("next-token loss (nats/token)"): [s.loss, s2.loss],
        t("change"): [0.0, s2.loss - s.loss],
        t("median slope"): [float(np.nanmedian(s.slope)), float(np.nanmedian(s2.slope))],
        t("mean H at the last position"): [float(s.mean["entropy"][:, H, -1].mean()),
                                        float(s2.mean["entropy"][:, H, -1].mean())],
    }), hide_index=True, width="stretch")
    cl = st.multiselect(t("Layers to compare"), list(range(L)), key="ent_cmp_layers")
    if cl:
        dfc = entropy_lib.compare_frame(s, s2, head_i, cl)
        chc = entropy_charts.compare(dfc, log_x=log_x)
        st.altair_chart(chc, width="stretch")
        which = t("Mean over heads.") if head_i is None else \
            t("Heads {names}.", names=", ".join(head_name(l, head_i) for l in cl))
        st.caption(t("Solid: unmodified; dashed: with the factor; grey: ln n.") + " " + which)
        ui.download_buttons(dfc, chc, stem="entropy_log_length", meta={**meta, "base": base, "clamp": clamp},
                            key="ent5")
    dfl = entropy_lib.loss_frame(s, s2)
    if not dfl.empty:
        chl = entropy_charts.loss_bins(dfl)
        st.altair_chart(chl, width="stretch")
        st.caption(t("Next-token loss change per bin of context length (log-length − unmodified; red = worse)."))
        ui.download_buttons(dfl, chl, stem="loss_log_length", meta={**meta, "base": base, "clamp": clamp},
                            key="ent6")
    change = s2.loss - s.loss
    if math.isfinite(change):
        if change > 0:
            tail = t("Sharper attention at long range is not free on a model trained without the factor "
                     "(the papers train with it).")
        elif change < 0:
            tail = t("On this text the sharper long-range attention helps the untouched model.")
        else:
            tail = t("The factor is 1 at every position used here.")
        how = t("rises") if change > 0 else t("falls") if change < 0 else t("is unchanged")
        st.caption(t("Over all {n} predicted tokens the loss {how} by {change} nats/token. {tail}",
                     n=f"{int(s.loss_count.sum()):,}", how=how, change=f"{abs(change):.4f}", tail=tail))


# ----------------------------------------------------------------------------- the page
c0, c1, c2, c3 = st.columns([1.6, 1.4, 1, 1])
texts, what = entropy_texts.pick(c0, ctx, state)
mode = c1.radio(t("Long texts"), SPLITS, key="ent_split", horizontal=True,
                format_func=lambda o: str(SPLIT_NAMES[o]),
                help=t("A text longer than the window is cut into consecutive windows (each one a document), "
                       "or only its first window is used."))
window = int(c2.number_input(t("Window (tokens)"), min_value=2, max_value=cfg.n_ctx, step=1,
                             key="ent_window", help=t("At most the model's context ({n}).", n=cfg.n_ctx)))
max_docs = int(c3.number_input(t("At most this many documents"), min_value=1, max_value=2000, step=1,
                               key="ent_max_docs"))

docs, info = entropy_lib.documents(ctx.model.encode, texts, window, split=mode == "split into windows", max_docs=max_docs)
if not docs:
    st.warning(t("Nothing to measure: every prompt here has fewer than 2 tokens. A single token attends only to "
                 "itself (weight 1, entropy 0), so there is no spread to look at. Type or upload a longer text."),
               icon="✋")
    ui.stop()
entropy_texts.documents_note(docs, info, what, window, mode == "split into windows", max_docs)
no_first = entropy_runs.no_first_toggle()
try:
    s = entropy_runs.summary(ctx, docs, label=t("Measuring attention entropy"), no_first=no_first)
except (ValueError, RuntimeError) as e:
    ui.show_error(t("Could not run the model: {error}", error=str(e)))
    ui.stop()
if s is None:                              # the first measurement is running (progress and Stop above) or stopped
    ui.stop()

meta = ui.meta_for(ctx, documents=s.n_docs, window=window, text=state.text)
verdict(s, state.text)

# ----------------------------------------------------------------------------- curves
st.subheader(t("Entropy against context length"))
c1, c2, c3 = st.columns([2, 1, 1])
layers = c1.multiselect(t("Layers"), list(range(L)), key="ent_layers")
head = c2.selectbox(t("Head"), ["mean"] + [str(h) for h in range(H)], key="ent_head",
                    format_func=lambda h: t("mean over heads") if h == "mean" else t("head {h}", h=h))
log_x = c3.checkbox(t("log scale for n"), key="ent_logx")
head_i = None if head == "mean" else int(head)
curves(s, layers, head_i, log_x)
beside_corpus(layers, head_i, log_x)
slopes_and_sinks(s, layers, head_i, log_x)

# ----------------------------------------------------------------------------- beyond the seed
st.subheader(t("Beyond the seed: log-length scaling"))
st.markdown(t(
    "Chiang & Cholak (2022) and the *entropy invariance* argument multiply the attention logits by log n, so "
    "that a query keeps its focus as the number n of keys grows. Here query *i*'s scores (before the mask) are "
    "multiplied by f = log_b(i + 1) for a base b you choose, on this already-trained model (no retraining)."
))
on = st.checkbox(t("Apply log-length scaling and compare"), key="ent_log_on")
if on:
    base, clamp, s2 = log_length_run(s)
    if s2 is None:
        ui.stop()
    log_length_results(s, s2, base, clamp, head_i, log_x)
