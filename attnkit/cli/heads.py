"""``python -m attnkit heads --model M [--text-file F] [--markdown]``: per-head scores, best heads per statistic."""
from __future__ import annotations

import sys
from pathlib import Path

from .. import loading
from ..compare import markdown_table
from ..i18n import t
from ..metrics import STATISTICS, head_table
from ..prompts import SAMPLE_TEXT, PromptError, decode_text, truncate
from . import args as cli_args

PROG = "attnkit heads"

def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit heads", description="per-head attention scores")
    p.add_argument("--model", default="attnkit-tiny", type=cli_args.utf8_text)
    p.add_argument("--device", default="cpu", type=cli_args.device)
    p.add_argument("--text-file", default=None, type=cli_args.existing_nonempty_text_file,
                   help="UTF-8 text (default: a built-in English paragraph)")
    p.add_argument("--induction-n", type=cli_args.int_in(1, 100_000), default=50,
                   help="length of the random half that is repeated")
    p.add_argument("--top", type=cli_args.int_in(1, 10_000), default=5, help="show the best heads per score")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables")
    return p


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    try:
        m = loading.load(a.model, a.device)
        text = decode_text(Path(a.text_file).read_bytes(), a.text_file) if a.text_file else SAMPLE_TEXT
    except (loading.LoadError, PromptError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    ids, dropped = truncate(m.encode(text), m.config.n_ctx)
    bos = getattr(m.tokenizer, "bos_token_id", None) if getattr(m, "tokenizer", None) is not None else None
    df = head_table(m.weights, ids, a.induction_n, bos_id=bos)
    n_used = min(a.induction_n, m.config.n_ctx // 2)          # what induction_scores can fit in the context
    shrunk = (f" (--induction-n {a.induction_n} shrunk to {n_used}: twice it must fit the context of "
              f"{m.config.n_ctx})") if n_used != a.induction_n else ""
    print(f"model {a.model}: {len(ids)} tokens of text" + (f" ({dropped} dropped)" if dropped else "")
          + f"; induction on {n_used} random tokens repeated twice (4 sequences){shrunk}"
          + ("" if bos is None else f"; TL recipe: BOS (id {bos}) + the same, 10 sequences, whole diagonal"))
    print(t("These rank where each head looks (its attention pattern), not what it does: a head with a sharper "
            "pattern can have no effect on the output. Measure the effect: python -m attnkit patch (activation "
            "patching) or ablate."))
    show = [s.name for s in STATISTICS.values() if s.ranked] + ["induction (random repeats)"]
    if bos is not None:
        show.append("induction (TL recipe)")
    for stat in show:
        best = df.nlargest(a.top, stat)[["layer", "head", stat]]
        print(f"\nbest heads by {stat}:")
        print(markdown_table(best) if a.markdown else best.to_string(index=False, float_format="%.3f"))
    return 0
