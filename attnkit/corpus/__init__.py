"""Corpus-scale analyses: head statistics, entropy curves and ablation losses over many documents,
on one machine or on a Ray cluster, with one code path.

    python -m attnkit corpus --model gpt2 --input docs.jsonl --analyses heads,entropy,ablation-loss \\
        --out runs/docs [--engine local|ray] [--address auto|HOST:PORT] [--window N] [--batch N]

Inputs (:mod:`.inputs`): a ``.jsonl`` file (one document per line: a JSON string, or an object whose
``--field``, default ``text``, is the document), a ``.txt``/``.md`` file (the whole file is one
document) or a folder (every ``.jsonl``/``.txt``/``.md`` below it, in sorted path order). Each
document is cut into consecutive windows of at most ``--window`` tokens exactly as the Entropy page
does (:func:`attnkit.entropy.documents`); windows under 2 tokens are dropped.

Analyses (:mod:`.analyses`): a registry, one :class:`Analysis` class per analysis — its name, its
Parquet columns, what it computes per batch of windows and how it is summarised.

Documents are grouped into shards of ``--shard-docs`` consecutive documents. A shard is the unit of
work (:mod:`.engines`): :class:`ShardWorker` (model loaded once) turns one shard into tables, in this
process (``local``) or in Ray Data actors (``ray``). The driver alone writes the results
(:mod:`.store`): one Parquet part per table and shard, then a ``_done`` marker. A rerun skips every
shard whose marker matches its documents' hash. A document that fails (unreadable line, tokenizer or
analysis error) gets ``status = "error"`` with the stage and the error, and the run goes on. Rows are
sorted within each shard, so both engines write the same files. A rerun into a folder holding a run
with other settings or other documents is refused (``redo_changed`` recomputes the changed shards
instead); a shard whose part no longer matches its marker (size and SHA-256) is computed again.

Summaries (:mod:`.summary`): percentile-bootstrap intervals (95 %) resampling documents.

The head atlas (:mod:`.atlas`, ``attnkit atlas``) runs two analyses of its own on the same engines and writes
an atlas folder (:mod:`.atlas_files`) from their shards (:mod:`.atlas_summary`).
"""
from __future__ import annotations

from .analyses import (ANALYSES, DEFAULT_ABLATIONS, UNAVAILABLE, Analysis, SummaryInput, Windows, ablation_loss,
                       check_ablation, register)
from .atlas import SHIPPED_CORPORA, run_atlas
from .atlas_files import load_atlas, render_json
from .engines import ENGINES, ShardWorker, check_ray_request
from .inputs import CorpusError, read_inputs
from .progress import Progress
from .run import SHARD_DOCS, RunReport, check_output, run_corpus, settings_for
from .series import check_series, run_series
from .store import tables_for
from .summary import CorpusResult, load_result, summarise

__all__ = [
    "ANALYSES", "UNAVAILABLE", "DEFAULT_ABLATIONS", "Analysis", "register", "Windows", "SummaryInput", "CorpusError",
    "read_inputs", "ShardWorker", "ENGINES", "ablation_loss", "check_ablation", "run_corpus", "settings_for",
    "RunReport", "SHARD_DOCS", "check_output", "check_ray_request", "tables_for", "summarise", "load_result", "CorpusResult", "Progress",
    "run_series", "check_series", "run_atlas", "load_atlas", "render_json", "SHIPPED_CORPORA",
]
