"""A corpus run per checkpoint of a series (:mod:`attnkit.series`): the same documents, the same settings,
one result folder per checkpoint (``OUT/<label>/``, each an ordinary corpus result that resumes), on the
local engine or on Ray; then one table of every head statistic by step (``OUT/heads_by_step.csv``)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .. import series as series_mod
from .inputs import CorpusError
from .run import run_corpus
from .summary import load_result

__all__ = ["run_series", "HEADS_BY_STEP", "INDEX"]

HEADS_BY_STEP = "heads_by_step.csv"
INDEX = "series_run.json"


def check_series(spec: str):
    """The series (CorpusError in one line when it is not one, or its checkpoints differ)."""
    try:
        s = series_mod.resolve(spec)
        series_mod.check_consistent(s)
    except series_mod.SeriesError as e:
        raise CorpusError(str(e)) from None
    return s


def run_series(input, out, spec: str, analyses=("heads",), *, progress=None, log=None, **options) -> pd.DataFrame:
    """``run_corpus`` for every checkpoint of the series ``spec`` into ``out/<label>``; ``options`` are
    run_corpus's (engine, window, batch, …). Returns (and writes to ``out/heads_by_step.csv``) the heads
    summary of every checkpoint with its step: step, label, layer, head, stat, mean, lo, hi, windows.
    ``progress(done, total, info)`` after each checkpoint."""
    s = check_series(spec)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    for k, m in enumerate(s.members):
        if log is not None:
            log(f"checkpoint {m.label} (step {m.step}), {k + 1}/{len(s)}")
        sub = out / m.label
        run_corpus(input, sub, m.name, analyses, log=log, **options)
        heads = load_result(sub).heads
        if heads is not None:
            frames.append(heads.assign(step=m.step, checkpoint=m.label))
        if progress is not None:
            progress(k + 1, len(s), {"step": m.step})
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    table.to_csv(out / HEADS_BY_STEP, index=False)
    (out / INDEX).write_text(json.dumps({"series": spec, "source": s.source, "steps": s.steps,
                                         "folders": [m.label for m in s.members],
                                         "analyses": list(analyses) if not isinstance(analyses, str) else analyses,
                                         "options": {k: v for k, v in options.items()
                                                     if isinstance(v, (int, float, str, bool, type(None)))}},
                                        indent=1), encoding="utf-8")
    return table
