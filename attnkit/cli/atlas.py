"""``python -m attnkit atlas``: every head of a model over a corpus — statistics, examples, pairs, a Q/K view and
its effect on the loss, with a verdict per role — as a static folder with one offline HTML file (the library is
:mod:`attnkit.corpus.atlas`). Bad input exits with 2 before any work."""
from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

from .. import corpus as corpus_lib
from ..corpus.atlas import EFFECT_TOKENS, SHIPPED_CORPORA, check_atlas_folder, corpus_path
from ..corpus.inputs import KINDS
from ..loading import LoadError, default_model, locate
from . import args as cli_args
from .pair import write_json
from .progress import Ticker

PROG = "attnkit atlas"


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(
        prog="python -m attnkit atlas",
        description="Every head of a model over a corpus: the distribution of each head statistic, top examples by "
                    "activation decile, top (query, key) token pairs, a 2-D view of its queries and keys, and its "
                    "effect on the loss when mean-ablated, with a verdict per role (pattern and effect | pattern "
                    "only | effect only | neither). Writes a folder with one JSON a head, an index, a manifest and "
                    "one self-contained HTML file.")
    p.add_argument("--model", default=None, type=cli_args.utf8_text,
                   help="hub name, attnkit-tiny or a local folder (default: as verify)")
    p.add_argument("--corpus", required=True, type=cli_args.utf8_text,
                   help="a text file (one document), a folder of them (each file a document; .jsonl: one a line), or "
                        "a shipped corpus: " + ", ".join(SHIPPED_CORPORA))
    p.add_argument("--out", required=True, type=cli_args.new_or_own_dir("manifest.json", PROG),
                   help="the atlas folder: new, empty, or one this command wrote (a rerun with the same settings "
                        "resumes it)")
    p.add_argument("--json", dest="json_out", required=True, type=cli_args.writable_path,
                   help="write the heads' verdicts and effects here as JSON")
    p.add_argument("--engine", default="local", choices=sorted(corpus_lib.ENGINES))
    p.add_argument("--address", default=None, type=cli_args.utf8_text, help="Ray cluster: auto or HOST:PORT")
    p.add_argument("--workers", type=cli_args.int_in(1, 1024), default=None, help="Ray actors (default: as many as fit)")
    p.add_argument("--window", type=cli_args.whole_number, default=None, help="tokens per window (default: the context)")
    p.add_argument("--batch", type=cli_args.whole_number, default=1, help="windows of equal length per forward (default 1)")
    p.add_argument("--shard-docs", type=cli_args.whole_number, default=corpus_lib.SHARD_DOCS,
                   help=f"documents per shard, the unit of work and of resuming (default {corpus_lib.SHARD_DOCS})")
    p.add_argument("--threads", type=cli_args.whole_number, default=1,
                   help="torch threads per worker (default 1; the last float bits depend on it: resume with the same)")
    p.add_argument("--device", default="cpu", type=cli_args.device, help="cpu, cuda, mps or auto (default cpu)")
    p.add_argument("--exclude-first", action="store_true",
                   help="verdicts and pairs read the statistics without position 0 (a sink dominates several); both "
                        "are computed and shown either way")
    p.add_argument("--effect-tokens", type=cli_args.int_in(1, 10**9), default=EFFECT_TOKENS,
                   help=f"ablate about this many tokens (every k-th document; default {EFFECT_TOKENS:,})")
    p.add_argument("--bootstrap", type=cli_args.int_in(0, 100_000), default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--max-docs", type=cli_args.int_in(1, 10**9), default=None, help="use only the first N documents (1–10⁹)")
    return p


def _check(a) -> str:
    """Every check before any work (CorpusError / LoadError): the model's name, the corpus, the folder, settings."""
    if a.engine == "ray" and importlib.util.find_spec("ray") is None:
        raise corpus_lib.CorpusError("--engine ray needs Ray: pip install ray (the local engine does not)")
    if a.engine == "local" and (a.address or a.workers):
        raise corpus_lib.CorpusError("--address and --workers are for --engine ray")
    path = corpus_path(a.corpus)
    corpus_lib.read_inputs(path, max_docs=a.max_docs)
    out_json = Path(a.json_out).expanduser().resolve()
    if path.is_dir() and out_json.is_relative_to(path.resolve()) and out_json.suffix.lower() in KINDS:
        raise corpus_lib.CorpusError(f"--json {a.json_out} lies in the corpus folder as a document it reads; "
                                     "give another file name")
    check_atlas_folder(a.out)
    model = a.model
    if model is None:
        model, notice = default_model()
        if notice:
            print(notice, file=sys.stderr)
    locate(model)
    corpus_lib.settings_for(model, ["atlas"], a.window, a.batch, a.shard_docs, device=a.device, threads=a.threads,
                            options={"atlas": {"check": True}})
    if a.engine == "ray":
        corpus_lib.check_ray_request(a.address)
    return model


def cli(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    try:
        model = _check(a)
        res = corpus_lib.run_atlas(
            a.corpus, a.out, model, engine=a.engine, address=a.address, window=a.window, batch=a.batch,
            shard_docs=a.shard_docs, threads=a.threads, device=a.device, workers=a.workers,
            no_first=a.exclude_first, effect_tokens=a.effect_tokens, bootstrap=a.bootstrap, max_docs=a.max_docs,
            command="python -m attnkit atlas " + shlex.join(sys.argv[2:] if argv is None else list(argv)),
            progress=Ticker(PROG, "documents (both passes)"), log=lambda s: print(f"{PROG}: {s}", file=sys.stderr))
    except (corpus_lib.CorpusError, LoadError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; finished shards kept, rerun to resume", file=sys.stderr)
        return 130
    if not write_json(a.json_out, corpus_lib.render_json(res), PROG):
        return 1
    _print(res, a)
    return 0


def _print(res, a) -> None:
    i = res.info
    print(f"{i['model']['name']}: {i['windows']} windows, {i['tokens']:,} tokens; effect on {i['effect']['tokens']:,} "
          f"tokens of {i['effect']['documents']} documents; float64 check "
          f"{'passed' if i['float64']['ok'] else 'FAILED'} on {i['float64']['windows']} windows; {i['seconds']} s")
    for h in res.heads:
        held = [f"{r['role']}: {r['verdict']}" for r in h["roles"] if r["pattern"]]
        e = h["effect"]
        eff = "—" if e["value"] is None else f"{e['value']:+.4f} [{e['low']:+.4f}, {e['high']:+.4f}]"
        print(f"  {h['head']:<7} effect {eff} ({e['direction']})  " + ("; ".join(held) or "no named pattern"))
    print(f"wrote {Path(a.out) / 'atlas.html'} (open it in a browser, offline), {Path(a.out) / 'heads'}/*.json, "
          f"index.json, manifest.json and {a.json_out}")
