"""Ship a training run's series (``train-default --snapshots N``: OUT/steps) as a packaged series such as
``attnkit/models/attnkit-tiny-steps``: the step folders and series.json, held-out text of the run's corpus for
the ICL score (``eval.txt``, named in series.json), and a MODEL_CARD.md whose numbers are measured on the
shipped weights themselves (:func:`attnkit.training.analyse`).

    python -m attnkit.dev.train.ship_series RUN_OUT DEST --command "python -m attnkit train-default …"
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from ... import series as series_mod
from ... import training
from ...cli import args as cli_args
from ...cli.outputs import swap_in
from .sources import build_corpus

EVAL_FILE = "eval.txt"
EVAL_CHARS = 24_000


def eval_text(seed: int, corpus: str, chars: int = EVAL_CHARS) -> str:
    """The run's validation documents (the same shuffle and hold-out as training), up to ``chars`` characters."""
    _, val = build_corpus(seed, None, None, corpus)
    out, total = [], 0
    for _, doc in val:
        if total >= chars:
            break
        out.append(doc.strip())
        total += len(doc)
    return "\n\n".join(out) + "\n"


def _corpus_section(card: Path) -> str:
    """The '## Training corpus' section of the run's own card (sources, versions, licences)."""
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    start = text.find("## Training corpus")
    if start < 0:
        return "## Training corpus\n\n(see the run's MODEL_CARD.md)\n"
    end = text.find("\n## ", start + 5)
    return text[start:end if end > 0 else None].rstrip() + "\n"


def _table(res: training.SeriesResult) -> str:
    lines = ["| step | tokens seen | val loss | best induction [95 % interval] | head | best previous-token | "
             "ICL score | loss on the repeat | K-comp. prev → ind. |", "|---|---|---|---|---|---|---|---|---|"]
    for r in res.frame().to_dict("records"):
        val = "" if r["val_loss"] is None else f"{r['val_loss']:.3f}"
        lines.append(f"| {r['step']:,} | {r['tokens_seen'] or 0:,} | {val} | {r['induction']:.3f} "
                     f"[{r['induction_lo']:.3f}, {r['induction_hi']:.3f}] | {r['induction_head']} | "
                     f"{r['previous_token']:.3f} | {r['icl']:+.3f} ± {r['icl_se']:.3f} | {r['repeat_loss']:.3f} | "
                     f"{r['k_composition']:.3f} ({'→'.join(r['k_pair'])}) |")
    return "\n".join(lines)


def write_card(dest: Path, run_out: Path, command: str, res: training.SeriesResult, name: str | None = None) -> None:
    """MODEL_CARD.md of the series in ``dest`` (titled ``name``, default the folder's name)."""
    name = name or dest.name
    cfg = json.loads((dest / res.checkpoints[0].label / "config.json").read_text(encoding="utf-8"))
    card = f"""# {name}

A *series*: {len(res.checkpoints)} snapshots (float16) of one small GPT-2-architecture model taken while it was
trained from scratch, chosen evenly along the training log's step × induction-score curve (so they are densest
where the induction head forms). Open it with `python -m attnkit training --series {name}`.

**These are NOT OpenAI's GPT-2 weights**, nor attnkit-tiny's: a smaller model trained for this purpose on
attnkit-tiny's kind of mixture (Debian package text, repeated-span rows and repeated random tokens), so
that an induction head forms within minutes of CPU training. A toy for watching attention learn.

## How it was made

    {command}

`GPT2Config(n_layer={cfg.get('n_layer')}, n_head={cfg.get('n_head')}, n_embd={cfg.get('n_embd')}, \
n_positions={cfg.get('n_positions')}, vocab_size={cfg.get('vocab_size')})`; each `step-NNNNNN/` is an ordinary
checkpoint (config, `model.safetensors` in float16, its tokenizer). `series.json` gives each snapshot's step,
tokens seen and the training log's losses; `{EVAL_FILE}` is held-out validation text of the same corpus (the
same shuffle and hold-out as training), the default text for the ICL score. Shipped with
`python -m attnkit.dev.train.ship_series`.

## Its numbers (measured on these weights)

Every number below is computed by `attnkit.training.analyse` on the shipped float16 weights themselves
(loaded as float32), not copied from the training log: best induction score on 4 sequences of 50 random
tokens repeated (its 95 % t-interval over the sequences), best previous-token score and the heads' statistics
on `{EVAL_FILE}`'s first context, the ICL score (Olsson et al.: mean loss late in a window minus early in it,
nats, ± its standard error over the windows; the windows are as long as the one the model was trained on,
{res.icl_positions.get("window")} tokens, so no position it was not trained at is read), the loss on the repeated
half, and the K-composition of the strongest previous-token → induction pair (random baseline ≈
{res.checkpoints[0].k_baseline:.3f}).

{_table(res)}

{res.verdict()}.
{res.icl_note()}.

{_corpus_section(run_out / "MODEL_CARD.md")}
## Licence

The weights are derived from the texts above under their licences (see the table); attnkit's own code is
under the repository's licence.
"""
    (dest / "MODEL_CARD.md").write_text(card, encoding="utf-8")


def ship(run_out: Path, dest: Path, command: str, seed: int = 1234, corpus: str = "en",
         eval_file: Path | None = None) -> training.SeriesResult:
    """The series of ``run_out`` into ``dest``: built in a hidden folder beside ``dest`` and moved there when
    complete (an earlier series in ``dest`` is replaced only then)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        shutil.copytree(run_out / "steps", work, dirs_exist_ok=True)
        text = eval_file.read_text(encoding="utf-8") if eval_file else eval_text(seed, corpus)
        (work / EVAL_FILE).write_text(text, encoding="utf-8")
        index = json.loads((work / series_mod.SERIES_FILE).read_text(encoding="utf-8"))
        index["texts"] = EVAL_FILE
        (work / series_mod.SERIES_FILE).write_text(json.dumps(index, indent=1), encoding="utf-8")
        res = training.analyse(series_mod.resolve(str(work)), use_cache=False)
        write_card(work, run_out, command, res, name=dest.name)
        swap_in(work, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def run_folder(s: str) -> str:
    """A train-default --snapshots run: a folder holding steps/series.json."""
    cli_args.writable_dir(s)
    if not (Path(s).expanduser() / "steps" / series_mod.SERIES_FILE).is_file():
        raise cli_args.Err(f"{s} holds no steps/{series_mod.SERIES_FILE}: not a train-default --snapshots run")
    return s


run_folder.role = "input"


def main(argv=None) -> int:
    p = cli_args.Parser(prog="python -m attnkit.dev.train.ship_series", shipped_ok=True,
                        description="ship a train-default --snapshots run as a packaged series")
    p.add_argument("run_out", type=run_folder)
    p.add_argument("dest", type=cli_args.new_or_own_dir(EVAL_FILE, "ship_series"),
                   help=f"new, empty, or a series this command shipped (it holds {EVAL_FILE}), e.g. "
                        "attnkit/models/attnkit-tiny-steps")
    p.add_argument("--command", required=True, type=cli_args.utf8_text,
                   help="the train-default command that made the run (for the card)")
    p.add_argument("--seed", type=cli_args.seed, default=1234)
    p.add_argument("--corpus", choices=["en", "zh"], default="en")
    p.add_argument("--eval-text", type=cli_args.existing_nonempty_text_file, default=None,
                   help="an eval.txt written before for the same seed and corpus (skips reading the corpus again)")
    a = p.parse_args(argv)
    res = ship(Path(a.run_out).expanduser(), Path(a.dest).expanduser(), a.command, a.seed, a.corpus,
               Path(a.eval_text).expanduser() if a.eval_text else None)
    print(res.frame()[["step", "induction", "induction_lo", "previous_token", "icl", "val_loss"]].to_string(index=False))
    print(res.verdict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
