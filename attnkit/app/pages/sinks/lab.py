"""The Sinks page's cache-eviction lab: the (k, w) grid chosen with widgets, run as a job (:func:`attnkit.eviction.
eviction_lab`), its chart with intervals beside the full cache, its table and the rescue verdict; and the generation
demo (greedy decoding with the full cache and with k sinks + a window of w)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attnkit.app.context import Context
from attnkit.app.escaping import plain
from attnkit.app.exports import download_buttons
from attnkit.app.jobs import job_result
from attnkit.app.state import PageState
from attnkit.app.tables import show_table
from attnkit.attention import Keep, rolling_refusal
from attnkit.ablations import MIN_EFFECT, MIN_TOKENS
from attnkit.eviction import CLAIM, ORIGINAL, ROLLING, eviction_lab
from attnkit.i18n import status_label, t
from attnkit.model import generate

__all__ = ["K_CHOICES", "window_choices", "grid", "generation"]

#: The numbers of first tokens (sinks) and of most recent keys (windows) offered.
K_CHOICES = (0, 1, 2, 4, 8, 16, 32, 64)


def window_choices(n_ctx: int) -> list[int]:
    """Powers of two from 4 up to the model's context."""
    return [w for w in (2 ** p for p in range(2, 21)) if w <= n_ctx]


def _modes(cfg, state: PageState) -> tuple[str, ...]:
    """The modes stated plainly; rolling offered where the family allows it, else the reason."""
    st.markdown(t("**Original positions** (always run): every key the cache keeps keeps its position, which is the "
                  "same as hiding the dropped keys with the mask: the exact answer, checked against HuggingFace. "
                  "**Rolling**: the cache re-assigns positions inside itself (sinks in the first slots, the window "
                  "after them), as StreamingLLM does; only rotary positions allow it, since moving a key to a new "
                  "slot is one rotation."))
    why = rolling_refusal(cfg)
    if why is not None:
        state.set("rolling", False)
        st.caption(t("Rolling is not run here: {why}.", why=why))
        return (ORIGINAL,)
    rolling = st.checkbox(t("Also the rolling cache"), key="sk_rolling",
                          help=t("Positions re-assigned inside the cache; each cell then has a second line."))
    return (ORIGINAL, ROLLING) if rolling else (ORIGINAL,)


def _table(df: pd.DataFrame) -> pd.DataFrame:
    names = {"sinks": t("sinks k"), "window": t("window w"), "mode": t("positions"), "loss": t("loss (nats/token)"),
             "low": t("95 % low"), "high": t("95 % high"), "delta": t("change against the full cache"),
             "delta_low": t("change, 95 % low"), "delta_high": t("change, 95 % high"),
             "keys": t("keys kept (k + w)"), "cost": t("cost ÷ the full cache")}
    return df[list(names)].rename(columns=names)


def _verdict(res) -> None:
    """The verdict on the claim, with the damage, the rescue and its share, each with its interval."""
    v = res.verdict
    st.markdown(t("**Claim tested.** {claim}", claim=CLAIM))
    show = {"supported": st.success, "not supported": st.error}.get(v.status, st.warning)
    show(t("Verdict: {status}. {measured}", status=status_label(v.status), measured=v.text))
    r = res.rescue
    if r:
        m1, m2, m3 = st.columns(3)
        m1.metric(t("damage: the window alone (w = {w})", w=r["window"]), f"{r['damage']['delta']:+.4f}",
                  help=t("95 % interval {low} … {high} nats/token", low=f"{r['damage']['low']:+.4f}",
                         high=f"{r['damage']['high']:+.4f}"))
        m2.metric(t("rescue: with the first {k} tokens too", k=r["sinks"]), f"{r['rescue']['delta']:+.4f}",
                  help=t("95 % interval {low} … {high} nats/token", low=f"{r['rescue']['low']:+.4f}",
                         high=f"{r['rescue']['high']:+.4f}"))
        share = r["recovered_share"] if r["damage"]["delta"] >= MIN_EFFECT else float("nan")   # else nothing to win back
        m3.metric(t("share of the damage won back"), "n/a" if share != share else f"{share:.0%}")
    if v.why:
        st.markdown(t("**Why.** {why}", why=v.why))
    if v.settle:
        st.info(t("What would settle it: {settle}.", settle=v.settle), icon="🔎")
    st.caption(t("Rule: {rule}", rule=v.rule))


def _show(res, meta: dict) -> None:
    full = res.full
    st.metric(t("full cache (nats/token)"), f"{full['loss']:.4f}",
              help=t("95 % interval {low} … {high} nats/token", low=f"{full['low']:.4f}", high=f"{full['high']:.4f}"))
    df = res.to_pandas()
    chart = res.chart()
    st.altair_chart(chart, width="stretch")
    st.caption(t("The mean next-token loss over {n} predicted tokens; bands: 95 % paired bootstrap intervals over "
                 "blocks of {block} tokens ({r} resamples, the same blocks for every cell); dashed: the full cache.",
                 n=f"{res.tokens:,}", block=res.block, r=res.resamples))
    download_buttons(df, chart, "eviction_grid", meta, key="sk-grid")
    show_table(_table(df), hide_index=True, width="stretch")
    _verdict(res)


def grid(ctx: Context, state: PageState, docs: list, doc_key, stats, meta: dict) -> None:
    """The (k, w) lab: widgets, the job, the chart, the table and the verdict."""
    cfg = ctx.model.config
    st.subheader(t("The evicting cache: the loss against (k, w)"))
    st.markdown(t("In a (k, w) cell query i sees key j when j ≤ i and (j < k or j > i − w): the first k tokens and "
                  "the w most recent, itself included. k = 0 keeps the window alone; a window as long as the text "
                  "keeps everything (the full cache, bit for bit)."))
    modes = _modes(cfg, state)
    ws_all = window_choices(cfg.n_ctx)
    state.fit_many("sinks", K_CHOICES, [0, 1, 4], what=t("Sinks k"), because=t("not one of the choices"))
    state.fit_many("windows", ws_all, [w for w in (32, 64, 128, 256) if w in ws_all] or ws_all[:1],
                   what=t("Windows w"), because=t("the model's context is {n} tokens", n=cfg.n_ctx))
    c1, c2 = st.columns(2)
    ks = sorted(c1.multiselect(t("Sinks k (first tokens kept)"), K_CHOICES, key="sk_sinks"))
    ws = sorted(c2.multiselect(t("Windows w (most recent keys kept)"), ws_all, key="sk_windows"))
    if not ks or not ws:
        st.info(t("Choose at least one k and one w."))
        return
    if stats is None:
        st.info(t("The lab starts once the sink measurements above are done."))
        return
    predicted = sum(len(d) - 1 for d in docs)
    short = predicted < MIN_TOKENS or max(map(len, docs)) <= min(ws)
    if short:                              # nothing to decide: the grid runs only when asked
        st.info(plain(t("This text predicts {n} tokens in windows of at most {longest}: a cache of w ≥ {longest} keys drops "
                  "nothing, and a verdict needs {need} predicted tokens or more. Choose a shipped text above for the "
                  "lab.", n=predicted, longest=max(map(len, docs)), need=MIN_TOKENS)))
    cells = len(ks) * len(ws) * len(modes) + 1
    weights, name = ctx.model.weights, ctx.model_name
    res = job_result("sk_lab", (ctx.key, doc_key, tuple(ks), tuple(ws), modes),
                     t("Running the grid ({cells} runs × {n} window(s))", cells=cells, n=len(docs)),
                     lambda progress: eviction_lab(weights, docs, ks, ws, modes, sink_stats=stats, model=name,
                                                   progress=progress), auto=not short, button=t("Run the grid anyway"))
    if res is not None:
        _show(res, meta)


# ----------------------------------------------------------------------------- generation

def _fit_generation(state: PageState, cfg) -> None:
    state.fit("gen_k", range(0, 65), 4, what=t("Sinks k"), because=t("0 to 64"))
    state.fit("gen_w", range(1, cfg.n_ctx + 1), min(32, cfg.n_ctx), what=t("Window w"),
              because=t("the model's context is {n} tokens", n=cfg.n_ctx))
    room = max(1, min(64, cfg.n_ctx - 2))
    state.fit("gen_n", range(1, room + 1), min(24, room), what=t("Tokens to generate"), because=t("1 to {n}", n=room))
    most = max(2, cfg.n_ctx - state.gen_n)
    state.fit("gen_len", range(2, most + 1), min(256, most), what=t("Prompt tokens"),
              because=t("the prompt and the new tokens fit in the context of {n}", n=cfg.n_ctx))


def _generate(weights, prompt: list, n: int, keep: Keep, rolling: bool, progress) -> dict:
    full = generate(weights, prompt, n)
    progress(1, 2)
    kept = generate(weights, prompt, n, keep=keep, rolling=rolling)
    progress(2, 2)
    return {"full": full.tokens, "kept": kept.tokens, "held": kept.cache.length}


def generation(ctx: Context, state: PageState, docs: list, meta: dict) -> None:
    """Greedy decoding after the text's first tokens with the full cache and with k sinks + a window of w."""
    cfg = ctx.model.config
    st.subheader(t("Generation: the full cache against k sinks + a window"))
    st.markdown(t("Greedy decoding after the first tokens of the text, once with the full KV cache and once with a "
                  "cache that really evicts: between steps it holds the first k tokens and the w most recent keys, "
                  "no more."))
    _fit_generation(state, cfg)
    c1, c2, c3, c4 = st.columns(4)
    k = int(c1.number_input(t("Sinks k"), 0, 64, key="sk_gen_k"))
    w = int(c2.number_input(t("Window w"), 1, cfg.n_ctx, key="sk_gen_w"))
    n = int(c3.number_input(t("Tokens to generate"), 1, max(1, min(64, cfg.n_ctx - 2)), key="sk_gen_n"))
    size = int(c4.number_input(t("Prompt tokens"), 2, max(2, cfg.n_ctx - n), key="sk_gen_len"))
    prompt = docs[0][:size]
    rolling = bool(state.rolling) and rolling_refusal(cfg) is None
    weights = ctx.model.weights
    got = job_result("sk_gen", (ctx.key, tuple(prompt), k, w, n, rolling), t("Generating twice"),
                     lambda progress: _generate(weights, prompt, n, Keep(k, w), rolling, progress), auto=False,
                     button=t("Generate both ways"))
    if got is None:
        return
    text = lambda ids: repr("".join(ctx.model.token_strs(ids)))      # noqa: E731 - model output, shown as it is
    st.text(t("prompt ends:") + "         " + text(prompt[-12:]))
    st.text(t("full cache:") + "          " + text(got["full"]))
    st.text(t("k sinks + window w:") + "  " + text(got["kept"]))
    rows = pd.DataFrame({"step": range(1, n + 1), "full": ctx.model.token_strs(got["full"]),
                         "kept": ctx.model.token_strs(got["kept"])})
    rows["same"] = rows["full"] == rows["kept"]
    differ = rows.index[~rows["same"]]
    where = (t("The two agree on all {n} tokens.", n=n) if not len(differ) else
             t("They part at step {step}.", step=int(differ[0]) + 1))
    st.caption(plain(t("{where} Prompt: the first {p} tokens of the text's first window; the evicting cache held {held} "
                 "keys per layer at the end ({mode}).", where=where, p=len(prompt), held=got["held"],
                 mode=t("rolling positions") if rolling else t("original positions"))))
    show_table(rows.rename(columns={"step": t("step"), "full": t("full cache"), "kept": t("k sinks + window w"),
                                    "same": t("same")}), hide_index=True, width="stretch", height=220)
    download_buttons(rows, None, "generation_eviction", {**meta, "sinks": k, "window": w, "rolling": rolling},
                     key="sk-gen")
