"""Entropy's measurements as background jobs: per-document curves cached for every session, aggregated over
the documents with progress and Stop (the Entropy page's logic, out of ``pages/3_Entropy.py``)."""
from __future__ import annotations

import streamlit as st

from attnkit import entropy as entropy_lib
from attnkit.app.caches import cached_result
from attnkit.app.context import Context
from attnkit.app.jobs import job_result
from attnkit.i18n import t


def _doc(name: str, device: str, weights, ids: tuple, base: float | None, clamp: bool, progress=None,
         no_first: bool = False):
    """Curves of one document (numpy): entropy [L, H, T], first-token mass [L, H, T], loss [T−1], cached for every
    session by (model, device, ids, intervention) (ui.cached_result: st.cache_data would replay the progress
    bar's updates into another run's bar).

    Computed block-wise (attnkit.streaming): no T × T pattern, so a document can fill the context of a
    long-context model; ``progress(layers_done, n_layers)`` (not part of the cache key) reports each layer."""
    def make():
        iv = entropy_lib.LogLengthScaling(base, clamp) if base else None
        c = entropy_lib.doc_curves(weights, list(ids), iv, loss=True, progress=progress, exclude_first=no_first)
        return c.entropy[0].cpu().numpy(), c.first_token[0].cpu().numpy(), c.loss[0].cpu().numpy()

    return cached_result(("entropy-doc", name, device, ids, base, clamp, no_first), make)


def summary(ctx: Context, docs: list[list[int]], base: float | None = None, clamp: bool = True,
            label: str = "Measuring", slot: str = "ent_summary", no_first: bool = False) -> entropy_lib.Summary | None:
    """Aggregate over the documents, as a job (progress in tokens × layers, Stop, the last result kept and
    marked stale); per-document curves are cached process-wide, so changing a selector redraws at once.
    ``no_first``: position 0 taken out (:func:`no_first_toggle`). None until the first result for these documents
    exists."""
    key = (ctx.model_name, ctx.device, hash(tuple(tuple(d) for d in docs)), base, clamp, no_first)
    name, device, weights, windows = ctx.model_name, ctx.device, ctx.model.weights, ctx.model.config.windows
    ds, n = [tuple(int(i) for i in d) for d in docs], ctx.model.config.n_layers
    total = sum(map(len, ds)) * n

    def work(progress):
        agg, done = entropy_lib.Aggregate(windows), 0
        for d in ds:                       # tokens × layers done, so that one long document moves the bar too
            agg.add(*_doc(name, device, weights, d, base, clamp,
                          progress=lambda l, _n, done=done, d=d: progress(done + len(d) * l, total), no_first=no_first))
            done += len(d) * n
            progress(done, total)
        return agg.result()

    return job_result(slot, key, f"{label} ({len(ds)} document(s), {sum(map(len, ds)):,} tokens)", work)


def no_first_toggle() -> bool:
    """The "exclude position 0" switch (session key ent_no_first) and, when on, what it changes."""
    on = st.checkbox(t("Exclude position 0 (the attention sink)"), key="ent_no_first")
    if on:
        st.caption(t("Position 0 is taken out: every query from 1 on is measured over keys j ≥ 1 only, renormalised, "
                     "so n counts the keys after the first and a head that parks its attention on the first token is "
                     "described by what it does with the rest; the first-token mass is then undefined. The loss is "
                     "the model's own."))
    return on
