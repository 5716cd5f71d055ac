"""``python -m attnkit corpus``: head statistics, entropy curves and ablation losses over a corpus,
locally or on Ray (the library is :mod:`attnkit.corpus`)."""
from __future__ import annotations

import importlib.util
import sys

from .. import corpus as corpus_lib
from ..dev.bench.corpus import bench
from ..loading import LoadError, default_model
from ..prompts import MAX_PROMPT_CHARS as MAX_CHARS
from . import args as cli_args
from .pair import write_json

PROG = "attnkit corpus"


def gpus(s: str) -> float:
    """--gpus-per-worker: a share of a GPU or whole GPUs, 0 to 64."""
    x = cli_args.nonneg_float(s)
    if x > 64:
        raise cli_args.Err(f"must be from 0 to 64 (GPUs per Ray actor), got {s}")
    return x


def _listed() -> dict:
    """The analyses this command offers (the atlas's passes run under ``attnkit atlas``)."""
    return {k: a for k, a in corpus_lib.ANALYSES.items() if a.listed}


def _parser():
    p = cli_args.Parser(
        prog="python -m attnkit corpus",
        description="Head statistics, entropy curves and ablation losses over a corpus, locally or on Ray.",
        epilog="analyses: " + "; ".join(f"{k}: {a.help}" for k, a in _listed().items()))
    p.add_argument("--model", default=None, type=cli_args.utf8_text,
                   help="hub name, attnkit-tiny or a local folder (default: as verify)")
    p.add_argument("--series", default=None, type=cli_args.utf8_text,
                   help="run per checkpoint of a series (attnkit-tiny-steps, a folder of step folders, NAME@REV,REV…) "
                        "into OUT/<checkpoint>/, with OUT/heads_by_step.csv (instead of --model)")
    p.add_argument("--input", type=cli_args.utf8_text,
                   help=".jsonl (one document per line), .txt/.md (one document) or a folder of them")
    p.add_argument("--field", default="text", type=cli_args.utf8_text, help="field of a .jsonl object holding the document (default text)")
    p.add_argument("--analyses", default=",".join(_listed()), help="comma-separated: " + ", ".join(_listed()))
    p.add_argument("--ablation", action="append", default=None, metavar="SPEC",
                   help="an ablation for ablation-loss (repeatable; default: " + ", ".join(corpus_lib.DEFAULT_ABLATIONS) + ")")
    p.add_argument("--out", type=cli_args.new_or_own_dir("manifest.json", "attnkit corpus"),
                   help="result folder: new, empty, or one this command wrote (a rerun with the same input and "
                        "settings resumes it; other input or settings are refused)")
    p.add_argument("--redo-changed", action="store_true",
                   help="the input of --out's run changed: recompute the shards whose documents changed (and drop "
                        "those past the input's end) instead of refusing")
    p.add_argument("--engine", default="local", choices=sorted(corpus_lib.ENGINES))
    p.add_argument("--address", default=None, type=cli_args.utf8_text, help="Ray cluster: auto or HOST:PORT (default: start Ray here)")
    p.add_argument("--workers", type=cli_args.int_in(1, 1024), default=None, help="Ray actors (default: as many as the cluster holds)")
    p.add_argument("--gpus-per-worker", type=gpus, default=0.0, help="> 0 runs each actor's model on a GPU")
    # --window, --batch, --shard-docs and --threads are checked by corpus.settings_for (one message for
    # the library and the command line)
    p.add_argument("--window", type=cli_args.whole_number, default=None, help="tokens per window (default: the model's context)")
    p.add_argument("--batch", type=cli_args.whole_number, default=4, help="windows of equal length per forward pass (default 4)")
    p.add_argument("--shard-docs", type=cli_args.whole_number, default=corpus_lib.SHARD_DOCS, help=f"documents per shard (default {corpus_lib.SHARD_DOCS})")
    p.add_argument("--max-docs", type=cli_args.int_in(1, 10**9), default=None, help="use only the first N documents (1–10⁹)")
    p.add_argument("--device", default="cpu", type=cli_args.device, help="cpu, cuda, mps or auto (local engine; default cpu)")
    p.add_argument("--threads", type=cli_args.whole_number, default=1,
                   help="torch threads per worker = CPUs per Ray actor (default 1; the numbers depend on it "
                        "in the last float bits, so a resumed run must use the same)")
    p.add_argument("--bootstrap", type=cli_args.int_in(0, 100_000), default=1000,
                   help="bootstrap resamples for the intervals (default 1000)")
    p.add_argument("--bench", action="store_true", help="measure documents/second: local, then Ray with --workers")
    p.add_argument("--bench-docs", type=cli_args.int_in(1, 100_000), default=48, help="documents the bench runs (1–100,000)")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path,
                   help="(--bench) write the measurements here")
    return p


def _note(text: str) -> None:
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def _check(a) -> tuple[str, list]:
    """Every check that needs no model (CorpusError): (the model's name, the ablations to run)."""
    if not a.input or not a.out:
        raise corpus_lib.CorpusError("--input and --out are required")
    if a.engine == "ray" and importlib.util.find_spec("ray") is None:
        raise corpus_lib.CorpusError("--engine ray needs Ray: pip install ray (the local engine does not)")
    if a.engine == "local" and (a.address or a.workers or a.gpus_per_worker):
        raise corpus_lib.CorpusError("--address, --workers and --gpus-per-worker are for --engine ray")
    ablations = a.ablation if a.ablation is not None else corpus_lib.DEFAULT_ABLATIONS
    corpus_lib.settings_for(a.model or "?", a.analyses, a.window, a.batch, a.shard_docs, ablations, a.field, a.device, a.threads)
    docs, _ = corpus_lib.read_inputs(a.input, a.field, a.max_docs)    # a missing or unusable input: stop before any work
    if a.engine == "ray":
        corpus_lib.check_ray_request(a.address, a.gpus_per_worker)
    model = a.model
    if model is None:
        model, notice = default_model()
        if notice:
            print(notice, file=sys.stderr)
    settings = corpus_lib.settings_for(model, a.analyses, a.window, a.batch, a.shard_docs, ablations, a.field, a.device,
                              a.threads)
    corpus_lib.check_output(a.out, settings, docs, redo_changed=a.redo_changed)    # other settings or documents there
    return model, list(ablations)


def _run_series(a) -> None:
    if a.model or a.bench:
        raise corpus_lib.CorpusError("--series replaces --model (and does not go with --bench)")
    if not a.input or not a.out:
        raise corpus_lib.CorpusError("--input and --out are required")
    corpus_lib.read_inputs(a.input, a.field, a.max_docs)
    corpus_lib.check_series(a.series)
    table = corpus_lib.run_series(a.input, a.out, a.series, a.analyses, engine=a.engine, address=a.address, window=a.window,
                         batch=a.batch, shard_docs=a.shard_docs, field=a.field, device=a.device, threads=a.threads,
                         workers=a.workers, gpus_per_worker=a.gpus_per_worker, max_docs=a.max_docs,
                         bootstrap=a.bootstrap, log=_note)
    for stat in ("previous-token", "induction"):
        rows = table[table["stat"] == stat] if len(table) else table
        for step, grp in rows.groupby("step") if len(rows) else ():
            r = grp.nlargest(1, "mean").iloc[0]
            print(f"step {step}: best {stat} {r['label']} {r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]")
    print(f"{a.out}/heads_by_step.csv: every head statistic by step")


def _run(a) -> corpus_lib.RunReport:
    model, ablations = _check(a)
    return corpus_lib.run_corpus(a.input, a.out, model, a.analyses, engine=a.engine, address=a.address, window=a.window,
                        batch=a.batch, shard_docs=a.shard_docs, ablations=ablations, field=a.field,
                        device=a.device, threads=a.threads, workers=a.workers, gpus_per_worker=a.gpus_per_worker,
                        max_docs=a.max_docs, bootstrap=a.bootstrap, redo_changed=a.redo_changed,
                        progress=corpus_lib.Progress(), log=_note)


def cli(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    try:
        if a.bench:
            res = bench(model=a.model or "attnkit-tiny", docs=a.bench_docs, window=a.window or 128,
                        workers=a.workers or 2, batch=a.batch, log=lambda s: print(s, flush=True))
            return 0 if not a.json_out or write_json(a.json_out, res, PROG) else 1
        if a.series:
            _run_series(a)
            return 0
        rep = _run(a)
    except (corpus_lib.CorpusError, LoadError) as e:    # bad input, or a model that will not load (here or in an actor)
        _note(str(e))
        return 2
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; finished shards kept, rerun to resume", file=sys.stderr)
        return 130
    except Exception as e:       # noqa: BLE001 - the run stopped part-way: say so in one line
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        _note(f"the run stopped: {type(e).__name__}{': ' + msg if msg else ''}; "
              "finished shards are kept, rerun to resume")
        return 1
    print_summary(rep, corpus_lib.load_result(a.out))
    return 0


def print_summary(rep: corpus_lib.RunReport, res: corpus_lib.CorpusResult):
    i = res.info
    d = i["documents"]
    print(f"{rep.out}: {d['finished']}/{d['total']} documents ({d['ok']} ok, {d['short']} short, {d['error']} "
          f"error), {i['windows']} windows, {i['tokens']:,} tokens; {rep.skipped_shards}/{rep.shards} shards resumed; "
          f"{rep.processed_docs} documents in {rep.seconds:.1f} s ({rep.docs_per_s:.2f} docs/s, engine {rep.engine})")
    lvl = int(round(i["interval"]["level"] * 100))
    if res.heads is not None:
        for stat in ("previous-token", "first-token", "induction"):
            top = res.heads[res.heads["stat"] == stat].nlargest(3, "mean")
            print(f"  top heads by {stat}: " + ", ".join(
                f"{r.label} {r.mean:.3f} [{r.lo:.3f}, {r.hi:.3f}]" for r in top.itertuples()) + f" ({lvl}% interval)")
    if res.ablation is not None:
        for r in res.ablation.itertuples():
            print(f"  {r.ablation:<16} {r.nats:.4f} nats/token [{r.lo:.4f}, {r.hi:.4f}]"
                  + ("" if r.ablation == "baseline" else f"  increase {r.increase:+.4f} [{r.increase_lo:+.4f}, {r.increase_hi:+.4f}]"))
    cut = res.documents[res.documents["chars_cut"] > 0]
    if len(cut):
        print(f"  {len(cut)} document(s) longer than {MAX_CHARS:,} characters: only their first {MAX_CHARS:,} "
              "were used (as on the Entropy page); split them into several documents to use all")
    for r in res.errors.head(5).itertuples():
        print(f"  {r.status}: {r.doc_id} ({r.stage}): {r.error}")
    if len(res.errors) > 5:
        print(f"  … {len(res.errors) - 5} more in {rep.out}/documents (status != ok)")
