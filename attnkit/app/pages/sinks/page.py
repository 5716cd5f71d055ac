"""Attention sinks & KV cache: the share of each head's attention on the first tokens (against position), what the
sink writes against the other keys, the sink heads; the (k, w) eviction lab with its verdict; generation with an
evicting cache beside the full one."""
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from attnkit import app as ui
from attnkit.app.pages.sinks import lab, texts
from attnkit.charts import sinks as sink_charts
from attnkit.i18n import t
from attnkit.sinks import measure_sinks, sink_rule


@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys sk_*, URL parameters by field name)."""

    prefix = "sk"
    source: str = "prompt"
    tokens: int = 4096
    share_k: int = 4
    heads: list[str] = ui.param([])          # drawn against position (none chosen: the sink heads, else the top 4)
    sinks: list[int] = ui.param([0, 1, 4])
    windows: list[int] = ui.param([32, 64, 128, 256])
    rolling: bool = False
    gen_k: int = 4
    gen_w: int = 32
    gen_n: int = 24
    gen_len: int = 256


def head_table(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """Every head, the largest share on the first token first, with headers in the session's language."""
    df = df.sort_values("first_token", ascending=False, na_position="last").rename(columns={f"first_{k}": "first_k"})
    names = {"name": t("head"), "first_token": t("share on the first token"),
             "first_k": t("share on the first {k} tokens", k=k), "write_sink": t("write of the sink ‖v₀·W_O‖"),
             "write_rest": t("mean write of the other keys"),
             "write_ratio": t("what the sink writes ÷ what the other keys write"), "sink": t("sink head")}
    return df[list(names)].rename(columns=names)


def sink_heads_line(stats) -> None:
    heads, rule = stats.heads(), sink_rule(stats.threshold, stats.from_position)
    if len(stats.windows_at) <= stats.from_position:
        st.warning(t("The text has only {n} tokens: the share is taken from position 1 on, where the first token is "
                     "one of few keys, so nearly every head looks like a sink. Choose a longer text for the rule's "
                     "own measurement.", n=len(stats.windows_at)), icon="✋")
    if heads:
        st.success(ui.plain(t("Sink heads ({rule}): {heads}.", rule=rule,
                              heads=", ".join(f"{n} ({s:.3f})" for n, s in heads))), icon="🕳️")
    else:
        st.info(ui.plain(t("No sink head on this text ({rule}). The largest shares on the first token: {heads}.",
                           rule=rule, heads=", ".join(f"{n} ({s:.3f})" for n, s in zip(stats.top_heads(),
                                                                                     _firsts(stats))))))


def _firsts(stats) -> list[float]:
    df = stats.to_pandas().set_index("name")["first_token"]
    return [float(df[n]) for n in stats.top_heads()]


def maps(stats) -> None:
    """The layer × head map of the share on the first k tokens; what the sink writes per head beside that share
    against context length."""
    df = stats.to_pandas()
    chart = sink_charts.share_heatmap(df, stats.k)
    st.altair_chart(chart, width="content")
    st.caption(ui.plain(t("Mean over the queries from position {start} on (earlier ones see few keys); outlined: the "
                          "sink heads.", start=stats.from_position)))
    ui.download_buttons(df, chart, "sink_share_per_head", meta, key="sk-map")
    left, right = st.columns(2)
    with left:
        chart = sink_charts.sink_writes(df)
        st.altair_chart(chart, width="stretch")
        st.caption(t("What a key adds to the residual stream per unit of attention is ‖v_j·W_O‖. A sink is a place to "
                     "park attention: when it writes less than the other keys (below the dashed line at 1), the "
                     "attention parked there changes little."))
        ui.download_buttons(df, chart, "sink_writes", meta, key="sk-writes")
    with right:
        by_position(stats)


def by_position(stats) -> None:
    """The share on the first k tokens against context length, for the heads chosen."""
    names = list(stats.to_pandas()["name"])
    state.fit_many("heads", names, [], what=t("Heads"), because=t("the model has {n} heads", n=len(names)))
    chosen = st.multiselect(t("Heads drawn against context length"), names, key="sk_heads",
                            placeholder=t("the sink heads, else the 4 with the largest share"))
    df = stats.by_position()
    chart = sink_charts.share_by_position(df, chosen or stats.top_heads())
    st.altair_chart(chart, width="stretch")
    st.caption(t("In a causal model query i sees the same i + 1 keys whatever follows, so this is also the share "
                 "against context length n = i + 1 (mean over the windows that reach it, in bins spaced on a log "
                 "scale)."))
    ui.download_buttons(df, chart, "sink_share_by_position", meta, key="sk-pos")


def measurements():
    """The sink measurements as a job; the sink heads, the maps, the share against position, the table."""
    st.subheader(t("Where the attention goes: the first tokens"))
    k = int(st.number_input(t("k: the share on the first k tokens"), min_value=1, max_value=64, step=1,
                            key="sk_share_k", help=t("The share of each query's attention on the first k tokens, "
                                                     "the sum of a_ij over j < k (k = 1: the first token alone).")))
    stats = ui.job_result("sk_sinks", (ctx.key, doc_key, k),
                          t("Measuring the sinks ({n} window(s), {tokens} tokens)", n=len(docs), tokens=f"{n_tokens:,}"),
                          lambda progress: measure_sinks(w, docs, k=k, model=ctx.model_name, progress=progress))
    if stats is None:
        return None
    sink_heads_line(stats)
    maps(stats)
    with st.expander(t("Every head: shares and writes")):
        ui.show_table(head_table(stats.to_pandas(), stats.k), hide_index=True, width="stretch")
        ui.download_buttons(stats.to_pandas(), None, "sink_heads", meta, key="sk-table")
    return stats


# ----------------------------------------------------------------------------- the page
ctx = ui.page("sinks")
cfg = ctx.model.config
w = ctx.model.weights
state = Inputs.load()
state.fit("source", texts.SOURCES, "prompt", what=t("Text"), because=t("not one of the choices"),
          fmt=texts.source_label)
if not 2 <= state.tokens <= texts.MAX_TOKENS:
    state.fit("tokens", [4096], 4096, what=t("Tokens N"), because=t("2 to {n}", n=f"{texts.MAX_TOKENS:,}"))
if not 1 <= state.share_k <= 64:
    state.fit("share_k", [4], 4, what=t("k: the share on the first k tokens"), because=t("1 to 64"))

st.markdown(t("Many heads park most of their attention on the first token or two: an **attention sink**. That is why "
              "a KV cache that keeps only the w most recent keys can fall apart, while one that also keeps the "
              "first k tokens may hold (StreamingLLM, Xiao et al. 2023). This page measures both on the model and "
              "text you choose: how much each head puts on the first tokens, and what the loss and the generated "
              "text do when the cache drops keys."))
c1, c2 = st.columns([3, 1])
source = c1.selectbox(t("Text"), texts.SOURCES, key="sk_source", format_func=texts.source_label,
                      help=t("The sidebar's prompt, or a text shipped with attnkit (long enough for the lab)."))
tokens = int(c2.number_input(t("Tokens N"), min_value=2, max_value=texts.MAX_TOKENS, step=256, key="sk_tokens",
                             help=t("The first N tokens of the text are used.")))
docs, have = texts.windows(ctx, source, tokens)
if not docs:
    ui.show_error(t("The text has {n} token(s): at least 2 are needed to predict one. Type a longer prompt or choose "
                    "a shipped text.", n=have))
    ui.stop()
n_tokens = sum(map(len, docs))
doc_key = hash(tuple(tuple(d) for d in docs))
texts.describe(docs, have, tokens, cfg.n_ctx)
meta = ui.meta_for(ctx, text=source, tokens=n_tokens, windows=len(docs))

stats = measurements()
lab.grid(ctx, state, docs, doc_key, stats, meta)
lab.generation(ctx, state, docs, meta)
