"""Step by step's tabs beside the one-head walk-through and the seeds' examples: the KV cache demonstration and why
W_Q ≠ W_K (the softmax calculator is shared with the Glossary: :mod:`attnkit.app.pages.shared.calculator`)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attnkit import steps as head_steps
from attnkit.app.caches import budgeted
from attnkit.app.context import Context
from attnkit.app.escaping import plain, show_error
from attnkit.app.exports import download_buttons, meta_for
from attnkit.app.navigation import open_page
from attnkit.app.state import PageState
from attnkit.app.tables import show_table
from attnkit.charts import steps as step_charts
from attnkit.i18n import punctuation, t
from attnkit.standard import head_name

__all__ = ["KV_TOKENS", "kv_cache", "sinks_link", "symmetry"]

#: Tokens the KV-cache demo generates by default: enough decoding steps for the cache's saving to show in seconds.
KV_TOKENS = 32


def kv_cache(ctx: Context, state: PageState) -> None:
    """Greedy decoding with and without the KV cache: the same tokens, the work each saves."""
    cfg, ids = ctx.model.config, ctx.ids
    T = len(ids)
    st.markdown(t("Greedy decoding with and without the KV cache. With it, each step feeds only the newest token "
                  "and reuses the keys and values of every earlier position; without it each step recomputes "
                  "the whole sequence. Both must choose the same tokens."))
    room = cfg.n_ctx - 1
    k1, k2, k3 = st.columns([1, 1, 1.6])            # the checkbox's label needs the room
    state.fit("kv_n", range(1, max(1, min(32, room)) + 1), min(KV_TOKENS, room), what=t("Tokens to generate"),
              because=t("1 to {n} here", n=max(1, min(32, room))))
    n_new = k1.number_input(t("Tokens to generate"), 1, max(1, min(32, room)), key="st_kv_n")
    most = max(1, min(T, cfg.n_ctx - n_new))
    state.fit("kv_len", range(1, most + 1), min(most, 256), what=t("Prompt tokens used"),
              because=t("the prompt and the new tokens fit in {most} + {n} positions", most=most, n=n_new))
    n_prompt = k2.number_input(t("Prompt tokens used"), 1, most, key="st_kv_len",
                               help=t("Without the cache every step reruns the whole sequence: on a CPU a long "
                                      "prompt makes that slow (which is the point, but takes a while)."))
    check = k3.checkbox(t("Also check the cached K/V rows against a full rerun"), value=n_prompt <= 256,
                        key="st_kv_check")
    prompt = ids[: int(n_prompt)]
    if len(prompt) < len(ids):
        st.caption(t("Using the first {n} of the prompt's {total} tokens.", n=f"{len(prompt):,}", total=f"{T:,}"))
    kv_key = (ctx.model_name, ctx.device, tuple(prompt), int(n_new), bool(check))
    if st.button(t("Generate both ways"), key="st_kv_go", type="primary"):
        with st.spinner(t("Generating {n} tokens twice …", n=n_new)):
            try:
                st.session_state["st_kv_result"] = (kv_key, head_steps.kv_cache_demo(ctx.model.weights, prompt, int(n_new),
                                                                            check_rows=bool(check)))
            except Exception as e:
                show_error(t("Generation failed: {error}", error=f"{e.__class__.__name__}: {str(e)[:200]}"))
    stored = st.session_state.get("st_kv_result")
    if stored is not None and stored[0] == kv_key:
        kv = stored[1]
        if kv.tokens_match:
            rows = ("" if kv.max_kv_diff != kv.max_kv_diff else
                    punctuation("; ") + t("cached K/V rows equal a fresh full run within {d}", d=f"{kv.max_kv_diff:.1e}"))
            st.success(t("Same {n} tokens with and without the cache (largest next-token logit difference {d}{rows}).",
                         n=n_new, d=f"{kv.max_logit_diff:.1e}", rows=rows), icon="✅")
        else:
            st.error(t("The tokens differ between the cached and the uncached run."), icon="❌")
        st.text(t("generated (cache):") + "    " + repr("".join(ctx.model.token_strs(kv.tokens_cached))))
        st.text(t("generated (no cache):") + " " + repr("".join(ctx.model.token_strs(kv.tokens_full))))
        show_table(kv.summary(), cells=("mode",), hide_index=True, width="stretch",
                   column_config={c: st.column_config.NumberColumn(format="%.4f")
                                  for c in ("seconds, step 0", "seconds, steps 1…", "GFLOP")})
        st.text(str(kv.timing_note()))
        st.caption(t("GFLOP counts the matrix products (2 per multiply-add): projections, q·kᵀ, weights·v, MLP "
                     "and the unembedding of every fed position. Seconds are wall-clock on this machine."))
        st.altair_chart(step_charts.kv_rows_chart(kv.steps), width="stretch")
        shown = kv.steps[["step", "predicts position", "fed (cache)", "reused rows", "new rows",
                          "fed (no cache)", "GFLOP (cache)", "GFLOP (no cache)", "seconds (cache)",
                          "seconds (no cache)"]]
        show_table(shown, hide_index=True, width="stretch")
        download_buttons(kv.steps, None, stem="kv_cache_steps", meta=meta_for(ctx, n_new=int(n_new)),
                            key="kv")
    else:
        st.info(t("Press the button to run both decodings."))
    sinks_link(ctx)


def sinks_link(ctx: Context) -> None:
    """The KV cache's next question, attention sinks: a paragraph and a button opening the Sinks page."""
    st.markdown(t("**Attention sinks.** A cache of the w most recent keys stays small, but many heads park their "
                  "attention on the first token (a sink): the Sinks page measures them on this prompt, and the loss "
                  "and the text generated when the cache keeps the first k tokens and the w most recent."))
    st.button(t("Open the Sinks page with this prompt"), key="st_kv_sinks", on_click=open_page, args=("sinks",),
              kwargs={"prompt": ctx.text, "source": "prompt"})


@budgeted
def _symmetry(name: str, device: str, ids: tuple, layer: int, head: int, _weights, _resid) -> dict:
    r = head_steps.xx_vs_qk(_weights, list(ids), layer, head, resid_pre=_resid)
    return {**r, "xx": r["xx"].cpu(), "qk": r["qk"].cpu()}


def symmetry(ctx: Context, state: PageState, layer: int, head: int, resid, labels: list[str]) -> None:
    """x̂·x̂ᵀ (symmetric, heavy diagonal) beside one head's q·kᵀ on this prompt, and what their numbers show."""
    ids, T = ctx.ids, len(ctx.ids)
    st.markdown(t(
        "The seed's argument: scoring with the raw vectors, X·Xᵀ, gives a **symmetric** matrix (t_i·t_j = t_j·t_i, "
        "so 'A looks at B' equals 'B looks at A') with a **heavy diagonal** (a vector is most similar to itself). "
        "Separate W_Q and W_K can break both. Here on this prompt, layer {layer}: x̂·x̂ᵀ (x̂ = ln_1 of the layer input) "
        "beside head {head}'s q·kᵀ (before scale and mask), and what the numbers show below the table.",
        layer=layer, head=head))
    with st.spinner(t("Computing x̂·x̂ᵀ and q·kᵀ …")):
        sym = _symmetry(ctx.model_name, ctx.device, tuple(ids), layer, head, ctx.model.weights, resid)
    table = pd.DataFrame([{"matrix": "x̂·x̂ᵀ", **sym["xx_stats"]}, {"matrix": t("q·kᵀ (head {head})", head=head),
                                                                    **sym["qk_stats"]}])
    show_table(table, hide_index=True, width="stretch",
               column_config={"asymmetry": st.column_config.NumberColumn("‖S−Sᵀ‖/‖S‖", format="%.4f"),
                              "diagonal share": st.column_config.NumberColumn(
                                  t("queries i ≥ 1 whose top visible key is itself"), format="%.3f"),
                              "diagonal margin": st.column_config.NumberColumn(
                                  t("median margin of the own key (std)"), format="%+.2f"),
                              "matrix": st.column_config.TextColumn(t("matrix"))})
    st.markdown(plain(str(head_steps.symmetry_verdict(sym, head_name(layer, head)))))   # wraps (st.text does not)
    st.caption(t("Query 0 sees only itself, so it is left out of the share. The margin is a query's own score minus "
                 "its best other visible score, in standard deviations of the visible scores (median over the "
                 "queries): positive when its own key wins."))
    W, start = 32, 0
    if T > W:
        state.fit("sym_start", range(0, T - W + 1), 0, what=t("Window start"), because=t("the prompt has {n} tokens", n=T))
        start = st.slider(t("Window start (the matrices are drawn for 32 tokens at a time; the numbers above use "
                            "the whole prompt)"), 0, T - W, key="st_sym_start")
    win, wl = slice(start, start + W), labels[start: start + W]
    c = st.columns(2)
    small = min(T, W) <= 10
    cell = max(6, min(18, 200 // len(wl)))          # two matrices, their labels and legends in half the page each
    c[0].altair_chart(step_charts.matrix_chart(sym["xx"][win, win], wl, wl, t("x̂·x̂ᵀ (symmetric)"), digits=1, text=small,
                                     diverging=True, size=cell, value_title="x̂·x̂ᵀ"), width="content")
    c[1].altair_chart(step_charts.matrix_chart(sym["qk"][win, win], wl, wl, t("q·kᵀ, head {head} (asymmetric)", head=head), digits=1,
                                     text=small, diverging=True, size=cell, value_title="q·kᵀ"), width="content")
