"""Entropy's measurements as background jobs: per-document curves cached for every session, aggregated over
the documents with progress and Stop (the Entropy page's logic, out of ``pages/3_Entropy.py``)."""
from __future__ import annotations

from attnkit import entropy as entropy_lib
from attnkit.app.caches import cached_result
from attnkit.app.context import Context
from attnkit.app.jobs import job_result


def _doc(name: str, device: str, weights, ids: tuple, base: float | None, clamp: bool, progress=None):
    """Curves of one document (numpy): entropy [L, H, T], first-token mass [L, H, T], loss [T−1], cached for every
    session by (model, device, ids, intervention) (ui.cached_result: st.cache_data would replay the progress
    bar's updates into another run's bar).

    Computed block-wise (attnkit.streaming): no T × T pattern, so a document can fill the context of a
    long-context model; ``progress(layers_done, n_layers)`` (not part of the cache key) reports each layer."""
    def make():
        iv = entropy_lib.LogLengthScaling(base, clamp) if base else None
        c = entropy_lib.doc_curves(weights, list(ids), iv, loss=True, progress=progress)
        return c.entropy[0].cpu().numpy(), c.first_token[0].cpu().numpy(), c.loss[0].cpu().numpy()

    return cached_result(("entropy-doc", name, device, ids, base, clamp), make)


def summary(ctx: Context, docs: list[list[int]], base: float | None = None, clamp: bool = True,
            label: str = "Measuring", slot: str = "ent_summary") -> entropy_lib.Summary | None:
    """Aggregate over the documents, as a job (progress in tokens × layers, Stop, the last result kept and
    marked stale); per-document curves are cached process-wide, so changing a selector redraws at once.
    None until the first result for these documents exists."""
    key = (ctx.model_name, ctx.device, hash(tuple(tuple(d) for d in docs)), base, clamp)
    name, device, weights, windows = ctx.model_name, ctx.device, ctx.model.weights, ctx.model.config.windows
    ds, n = [tuple(int(i) for i in d) for d in docs], ctx.model.config.n_layers
    total = sum(map(len, ds)) * n

    def work(progress):
        agg, done = entropy_lib.Aggregate(windows), 0
        for d in ds:                       # tokens × layers done, so that one long document moves the bar too
            agg.add(*_doc(name, device, weights, d, base, clamp,
                          progress=lambda l, _n, done=done, d=d: progress(done + len(d) * l, total)))
            done += len(d) * n
            progress(done, total)
        return agg.result()

    return job_result(slot, key, f"{label} ({len(ds)} document(s), {sum(map(len, ds)):,} tokens)", work)
