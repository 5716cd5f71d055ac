"""The shipped model's ``MODEL_CARD.md``: architecture, corpus, training, the heads attnkit measures on
the saved model, and the commands that reproduce it."""
from __future__ import annotations

import math
from pathlib import Path

from ... import loading
from ...compare import markdown_table
from ...standard import head_name
from ...metrics import head_table
from ...prompts import SAMPLE_TEXT, SAMPLE_TEXT_ZH
from ...prompts import truncate
from .mixture import span_range
from .sources import CORPORA, DOCS, EOT, MAX_DOC_CHARS, PROSE, VAL_EVERY
from .tokenizer import REQUIRED_BOOST, REQUIRED_TOKENS, REQUIRED_ZH

HEADS_CMD = "python -m attnkit heads --model attnkit-tiny --top 3 --markdown"
#: attnkit-tiny-zh's heads are measured on Chinese text: attnkit's own paragraph, written to this file
ZH_TEXT_FILE = "sample_zh.txt"


def heads_cmd(info: dict) -> str:
    """The command that prints the card's head tables (on Chinese text for a zh model)."""
    if info.get("corpus") == "zh":
        return (f"python -m attnkit heads --model {info.get('name', 'attnkit-tiny-zh')} "
                f"--text-file attnkit/models/{info.get('name', 'attnkit-tiny-zh')}/{ZH_TEXT_FILE} --top 3 --markdown")
    return HEADS_CMD


def head_report(folder: Path, top: int = 3, text: str = SAMPLE_TEXT) -> tuple[str, dict]:
    """Markdown tables of the best heads, measured by attnkit on the saved model exactly as
    ``python -m attnkit heads`` does (``text``, by default its built-in paragraph; induction on 4 x 50
    random tokens repeated, and TransformerLens's recipe), and the best score per statistic."""
    m = loading.load(str(folder), "cpu")
    ids, _ = truncate(m.encode(text), m.config.n_ctx)
    df = head_table(m.weights, ids, 50, bos_id=m.tokenizer.bos_token_id)
    parts, best = [], {}
    for stat in ("previous-token", "first-token", "self", "duplicate-token", "induction",
                 "induction (random repeats)", "induction (TL recipe)"):
        top_df = df.nlargest(top, stat)[["layer", "head", stat]]
        best[stat] = {"layer": int(top_df.iloc[0]["layer"]), "head": int(top_df.iloc[0]["head"]),
                      "score": float(top_df.iloc[0][stat])}
        parts.append(f"best heads by {stat}:\n{markdown_table(top_df)}")
    sinks = df[df["first-token"] >= 0.5]   # attention sinks: half or more of the mass on position 0
    best["sink_heads"] = [(int(l), int(h), float(f))
                          for l, h, f in zip(sinks["layer"], sinks["head"], sinks["first-token"])]
    return "\n\n".join(parts), best


def head_section(out: Path, info: dict) -> str | None:
    """Measure the saved model's heads and put the card's *Head structure* text into ``info``; None,
    or why it failed (the card is then written without it)."""
    zh = info.get("corpus") == "zh"
    try:
        if zh:
            (out / ZH_TEXT_FILE).write_text(SAMPLE_TEXT_ZH, encoding="utf-8")
        report, best = head_report(out, text=SAMPLE_TEXT_ZH if zh else SAMPLE_TEXT)
        info["head_report"] = (f"Per-head scores computed by attnkit (`attnkit.metrics`, from attnkit's own patterns),\n"
                               f"measured after training with\n\n```\n{heads_cmd(info)}\n```\n\non "
                               + ("attnkit's own Chinese paragraph (`" + ZH_TEXT_FILE + "`)" if zh
                                  else "its built-in English paragraph") + " and, for the induction tables, on 4 sequences of 50 random tokens repeated "
                               "twice (attnkit's recipe: queries in the second copy only) and on 10 sequences of a BOS "
                               "token + 50 random tokens repeated twice, averaged over the whole offset diagonal "
                               "(TransformerLens's recipe; at most 50/52 = 0.96). Scores are fractions of attention "
                               "mass (see `attnkit.metrics.HEAD_STATS`).\n\n" + report + "\n\n" + _sink_text(best)
                               + "\n\n" + _targets_text(best, zh))
        info["best_heads"] = best
    except Exception as e:  # noqa: BLE001 - the card must still be written
        return f"head report failed: {e.__class__.__name__}: {e}"
    return None


def _architecture(info: dict) -> str:
    c = info["config"]
    return f"""# {info.get('name', 'attnkit-tiny')}

A tiny GPT-2-architecture language model trained from scratch by
`attnkit/dev/train/`, shipped inside the `attnkit` package so the dashboard works
offline.

**These are NOT OpenAI's GPT-2 weights.** No OpenAI weights, tokenizer or data were
used: the model and its tokenizer were trained from random initialisation on the
Debian package text listed below. It is a toy model for looking at attention
patterns, not a useful language model.

## Architecture

`transformers.GPT2LMHeadModel`, `GPT2Config(n_layer={c['n_layer']}, n_head={c['n_head']},
n_embd={c['n_embd']}, n_positions={c['n_positions']}, vocab_size={c['vocab_size']})`, dropout 0,
tied input/output embeddings, GELU MLP (4x), pre-LayerNorm, learned positions{_pos_init_text(info)}.

- parameters: {info['n_params']:,} (unique; {info['n_params_non_emb']:,} excluding token and position embeddings)
- weights: `model.safetensors` (float32), config: `config.json`
- tokenizer: byte-level BPE (GPT-2 style `ByteLevel` pre-tokenizer, no prefix space),
  vocab {c['vocab_size']} incl. `{EOT}` (id {info['eot_id']}) used as bos/eos/unk and as the
  document separator. Files: `tokenizer.json`, `vocab.json`, `merges.txt`,
  `tokenizer_config.json`; `AutoTokenizer.from_pretrained` gives a GPT-2 fast tokenizer.
  Byte-level, so any UTF-8 text (English, Chinese, emoji) round-trips exactly.
  So that the seeds' example words are single tokens with their leading space
  ({', '.join('`' + w.replace(' ', '␣') + '`' for w in REQUIRED_TOKENS)}), the
  tokenizer's training texts (not the model's) also hold these words {REQUIRED_BOOST:,} times;
  the run stops if any of them is split.{_zh_words(info)}

"""


def _zh_words(info: dict) -> str:
    if info.get("corpus") != "zh":
        return ""
    return ("\n  Chinese is written without spaces, so these Chinese words are boosted the same way (one a line,\n"
            f"  each its own pre-token): {', '.join('`' + w + '`' for w in REQUIRED_ZH)}; 猫坐在垫子上 is 5 tokens\n"
            "  (猫 / 坐 / 在 / 垫子 / 上).")


def _corpus(info: dict) -> str:
    vers = info.get("package_versions", {})
    src_rows = "\n".join(
        f"| `{pkg}` {vers.get(pkg, '')} | {', '.join('`' + p + '`' for p in pats)} | {lic} | "
        f"{info['source_chars'].get(pkg, 0):,} |"
        for pkg, lic, pats, _ in CORPORA[info.get("corpus", "en")])
    if info.get("corpus_file"):
        src_rows = f"| (custom) | `{info['corpus_file']}` | see file | {info['corpus_chars']:,} |"
    return f"""## Training corpus

Text shipped by Debian 12 packages, read from the local file system:

| apt package, version | paths | licence (`/usr/share/doc/<pkg>/copyright`) | characters |
|---|---|---|---|
{src_rows}

HTML is converted to plain text (tags stripped); ANSI colour codes are removed from the
fortunes; manual pages keep their text (roff requests and font escapes dropped). Long files are cut into documents of at most
~{MAX_DOC_CHARS} characters at paragraph boundaries, each fortune is one document.
Documents are shuffled (seed {info['seed']}) and every {VAL_EVERY}th is held out for validation.
{_share_text(info)}

- documents: {info['n_train_docs']:,} train / {info['n_val_docs']:,} validation
- characters: {info['corpus_chars']:,}
- tokens: {info['train_tokens']:,} train / {info['val_tokens']:,} validation

"""


def _schedule(info: dict) -> tuple[str, str]:
    """(the LR schedule in words, a note when the run stopped before its schedule's end)."""
    c = info["config"]
    sched = ""
    if info.get("schedule") == "wsd":
        sched_text = (f"{info['warmup']} warmup steps, constant LR until step {info['decay_start']}, then "
                      f"linear decay to 10% at step {info['schedule_steps']:,} (warmup-stable-decay; the "
                      f"decay start was chosen by the time box `--minutes`)")
    else:
        sched_text = f"{info['warmup']} warmup steps then cosine decay to 10%"
    if info.get("long_start") is not None:
        sched_text += (f"; from step {info['long_start']:,} on (chosen by the time box as its last "
                       f"{round(100 * (1 - info.get('long_frac', 0.9)))}% of the time) windows of "
                       f"{c['n_positions']} tokens, batch {max(1, info['batch'] * info['short_block'] // c['n_positions'])}")
    if info.get("schedule_steps", info["steps"]) != info["steps"]:
        sched = (f" (stopped early: the warmup + cosine schedule was planned for "
                 f"{info['schedule_steps']:,} steps)")
    return sched_text, sched


def _training(info: dict) -> str:
    c = info["config"]
    sched_text, sched = _schedule(info)
    return f"""## Training

AdamW (betas 0.9/0.95, weight decay {info['weight_decay']} on matrices), peak LR {info['lr']},
{sched_text}, gradient clipping 1.0,
batches of {info['batch']} random {info.get('short_block', c['n_positions'])}-token windows, {info['steps']:,} steps{sched},
seed {info['seed']}, {info['threads']} CPU thread(s), {_precision_text(info)}.{_last_stage_note(info)}
{_mixture_text(info)}{formation_text(info)}

- tokens seen: {info['tokens_seen']:,} (about {info['epochs']:.2f} epochs of the training split)
- wall time: {info['train_seconds'] / 60:.1f} min ({info['tokens_per_s']:,.0f} tokens/s on CPU)

| cross-entropy (nats/token) | train | validation |
|---|---|---|
| {info.get('name', 'attnkit-tiny')} | {info['final_train_loss']:.3f} | {info['final_val_loss']:.3f} |
| unigram baseline (add-one smoothed train counts) | {info['unigram_train']:.3f} | {info['unigram_val']:.3f} |

Model losses are measured after training in non-overlapping {c['n_positions']}-token windows over
the whole validation split and over a fixed {info['train_eval_tokens']:,}-token slice of the training
split; the unigram baseline is scored on exactly the same target tokens.
Validation perplexity: {math.exp(info['final_val_loss']):.1f} (unigram: {math.exp(info['unigram_val']):.1f}).{_short_loss_text(info)}

{_bpb_text(info)}

"""


def _heads_and_reproduce(info: dict) -> str:
    return f"""## Head structure

{info.get('head_report') or '_Run `' + heads_cmd(info) + '` for the per-head scores._'}

## Reproduce

{_stages_text(info)}

Library versions used: torch {info['versions']['torch']}, transformers {info['versions']['transformers']},
tokenizers {info['versions']['tokenizers']}, Python {info['versions']['python']}.
The same command with the same versions and Debian package versions reproduces the weights
(CPU float32; results may differ across CPUs or library versions at the last digits).
"""


def write_card(out: Path, info: dict) -> None:
    """Write ``out/MODEL_CARD.md`` from the training log ``info``."""
    card = _architecture(info) + _corpus(info) + _training(info) + _heads_and_reproduce(info)
    status = _status(info)
    if status:                                   # after the title: a reader sees it first
        title, rest = card.split("\n", 1)
        card = f"{title}\n\n{status}{rest}"
    (out / "MODEL_CARD.md").write_text(card, encoding="utf-8")


def _status(info: dict) -> str:
    """One paragraph when a head target was not met (the numbers, from the measured heads), else ""."""
    best, zh = info.get("best_heads") or {}, info.get("corpus") == "zh"
    missed = [(stat, target, best[stat]) for stat, target in (HEAD_TARGETS_ZH if zh else HEAD_TARGETS).items()
              if stat in best and best[stat]["score"] < target]
    if not missed:
        return ""
    said = "; ".join(f"best {stat} score {b['score']:.3f} ({head_name(b['layer'], b['head'])}) against a target of "
                     f"≥ {target}" for stat, target, b in missed)
    return (f"> **Status (read first).** Not every head target was met: {said} (measured on "
            + ("Chinese text" if zh else "its English paragraph") + " and on repeated random tokens; see *Head "
            "structure*). Patterns on this model show these heads as they are, weaker than the targets.\n")


def _last_stage_note(info: dict) -> str:
    if len(info.get("stages") or []) < 2:
        return ""
    return (" (This paragraph describes the last stage; *Reproduce* lists every\n"
            "stage. The figures below cover the whole training.)")


def _stages_text(info: dict) -> str:
    stages = info.get("stages") or [{"command": info["command"]}]
    if len(stages) == 1:
        return f"```\n{stages[0]['command']}\n```"
    lines = [f"Trained in {len(stages)} stages; each later stage continues the previous one's output "
             "(`--init-from`), with a fresh optimizer and its own LR schedule:", ""]
    for i, st_ in enumerate(stages, 1):
        lines.append(f"{i}. {st_['steps']:,} steps, {st_['tokens_seen']:,} tokens, "
                     f"{st_['train_seconds'] / 60:.1f} min:")
        lines.append(f"   `{st_['command']}`")
    lines += ["", f"Each stage's `--init-from` is the previous stage's `--out`; the last stage's output folder "
                  f"is what ships as `{info.get('name', 'the model')}`."]
    return "\n".join(lines)


def _pos_init_text(info: dict) -> str:
    if info.get("pos_init") != "sinusoid":
        return ""
    return (" (initialised as sin/cos codes of the same per-dimension scale as GPT-2's N(0, 0.02), "
            "then trained like every other weight)")


def _share_text(info: dict) -> str:
    sc, total = info["source_chars"], max(1, info["corpus_chars"])
    prose = sum(sc.get(k, 0) for k in PROSE) / total
    docs = sum(sc.get(k, 0) for k in DOCS) / total
    zh = sc.get("fortunes-zh", 0) / total
    if info.get("corpus_file"):
        return ""
    if info.get("corpus") == "zh":
        zh_total = sum(v for k, v in sc.items() if k.endswith("-zh") or k.endswith("-zh-cn") or k == "manpages-zh")
        return (f"By characters: {zh_total / total:.0%} Chinese-language sources (reference, FAQ, maintainer's guide, "
                f"Debian Edu manual, manual pages, fortunes and classical poems), {1 - zh_total / total:.0%} English "
                "prose (fortunes, The Devil's Dictionary).")
    return (f"By characters: {prose:.0%} English prose and glosses (fortunes, The Devil's Dictionary, the Jargon\n"
            f"File, WordNet's glosses with their example sentences), {docs:.0%} documentation (Debian\n"
            f"Handbook, FAQ and Reference, the Python tutorial, FAQ and HOWTOs; "
            f"{sc.get('python3.11-doc', 0) / total:.0%} Python),\n{zh:.0%} Chinese (fortunes-zh).")


def _sink_text(best: dict) -> str:
    sinks = best.get("sink_heads") or []
    if not sinks:
        return "First-token (attention sink) heads: none puts half or more of its attention on position 0."
    return ("First-token (attention sink) heads, half or more of their attention on position 0: "
            + ", ".join(f"{head_name(l, h)} ({f:.2f})" for l, h, f in sinks) + ".")


#: What the shipped model is meant to show (issue 14): heads a researcher recognises from real GPT-2.
HEAD_TARGETS = {"previous-token": 0.7, "induction (random repeats)": 0.5, "induction (TL recipe)": 0.5}
#: The Chinese model's (issue 36): as attnkit-tiny's on English, measured on Chinese text.
HEAD_TARGETS_ZH = {"previous-token": 0.8, "induction (random repeats)": 0.9, "induction (TL recipe)": 0.9}


def _targets_text(best: dict, zh: bool = False) -> str:
    rows = []
    for stat, target in (HEAD_TARGETS_ZH if zh else HEAD_TARGETS).items():
        b = best.get(stat)
        if b is None:
            continue
        ok = "met" if b["score"] >= target else "**not met**"
        rows.append(f"| {stat} | ≥ {target} | {b['score']:.3f} ({head_name(b['layer'], b['head'])}) | {ok} |")
    return ("Targets this model was trained for:\n\n| head | target | best reached | |\n|---|---|---|---|\n"
            + "\n".join(rows))


def formation_text(info: dict, record: bool = False) -> str:
    """When (in the last stage's log) the best induction score on random repeats first passed 0.1 and 0.5.

    A stage whose log opens with the head already formed carries the text of the stage where it formed: the
    earliest stage with a ``formation`` record (later records are copies of it). ``record=True`` gives that
    text as it is stored (for the next stage's record); otherwise it says in which stage.
    """
    hist = info.get("history") or []
    stages = info.get("stages") or []
    before = sum(s_["steps"] for s_ in stages[:-1]) if len(stages) > 1 else 0
    tok_per_step = info["batch"] * info.get("short_block", info["config"]["n_positions"])
    firsts = {lv: next((i for i, h in enumerate(hist) if h.get("best_induction", 0) >= lv), None) for lv in (0.1, 0.5)}
    if firsts[0.1] is None or (firsts[0.1] == 0 and before):      # not in this stage's log: an earlier stage's
        stage, earlier = next(((n, s_["formation"]) for n, s_ in enumerate(stages[:-1], 1) if s_.get("formation")),
                              (None, ""))
        return earlier if record or not earlier else earlier.rstrip(".") + f", in stage {stage}; later stages kept it."
    marks = []
    for level, i in firsts.items():
        if i is not None:
            step = before + hist[i]["step"]
            marks.append(f"{level} at step {step:,} (~{step * tok_per_step / 1e6:.1f}M tokens)")
    i = firsts[0.1]
    flat = f" after staying below 0.1 up to step {before + hist[i - 1]['step']:,}" if i > 0 else ""
    return ("\n\nThe induction head formed abruptly (a phase change, as Olsson et al. 2022 describe for larger "
            "models): in the training log (every stage's steps counted) the best induction score on repeated "
            "random tokens passed " + " and ".join(marks) + flat + ".")


def _precision_text(info: dict) -> str:
    if info.get("bf16"):
        return "float32 weights and optimizer, bfloat16 autocast in the training forward pass (evaluation in float32)"
    return "float32"


def _mixture_text(info: dict) -> str:
    tr, rr, ps = info.get("text_repeat", 0), info.get("random_repeat", 0), info.get("pos_shift", 0)
    if not (tr or rr or ps):
        return ""
    lo, hi = span_range(info.get("short_block") or info["config"]["n_positions"])
    lines = ["", "Training data mixture (each row of each batch drawn independently, from step 0):"]
    if tr:
        lines.append(f"- {tr:.0%}: a span of {lo}-{hi} tokens of natural training text, repeated until the window "
                     "is full (half of them after an `<|endoftext|>`): induction-friendly, the model can lower "
                     "its loss by copying what followed the earlier occurrence of the current token;")
    if rr:
        lines.append(f"- {rr:.0%}: a span of {lo}-{hi} uniformly random token ids, repeated the same way; the first "
                     "copy is not scored (it cannot be predicted), only the repeats;")
    nat = 1 - tr - rr
    lines.append(f"- {nat:.0%}: ordinary windows of the training stream" + (
        f"; {ps:.0%} of those in the short phase are given a random position offset in "
        f"[0, {info['config']['n_positions'] - info.get('short_block', 0)}] (position_ids), so the positions "
        "beyond the short window are trained from the start." if ps else "."))
    return "\n".join(lines)


def _short_loss_text(info: dict) -> str:
    if info.get("val_loss_short") is None:
        return ""
    return (f" In {info['short_block']}-token windows (the short training window) the validation loss is "
            f"{info['val_loss_short']:.3f}.")


def _bpb_text(info: dict) -> str:
    bpb = info.get("bits_per_byte") or {}
    if not bpb:
        return ""
    name = info.get("name", "attnkit-tiny")   # the training log names the model's rows attnkit-tiny
    bpb = {k.replace("attnkit-tiny", name, 1) if k.startswith("attnkit-tiny (") else k: v for k, v in bpb.items()}
    rows = "\n".join(f"| {k} | {v:.3f} |" for k, v in bpb.items())
    chars = info.get("val_chars")
    per_char = ""
    if chars:
        per_char = ("\n\nBits per character (the same nats over the validation split's "
                    f"{chars:,} characters, {info.get('val_bytes', 0) / chars:.2f} bytes a character):\n\n"
                    "| model | bits/character |\n|---|---|\n"
                    + "\n".join(f"| {k} | {v * info.get('val_bytes', 0) / chars:.3f} |" for k, v in bpb.items()))
    return (f"Bits per UTF-8 byte on the validation split ({info.get('val_bytes', 0):,} bytes; every text "
            "token scored, the `<|endoftext|>` separators given but not scored), comparable across "
            f"tokenizers:\n\n| model | bits/byte |\n|---|---|\n{rows}{per_char}")


SCHEDULE_FLAGS = ("--minutes", "--steps", "--stop-after", "--schedule", "--decay-start", "--long-start",
                  "--long-frac")


def reproduce_argv(argv: list[str], steps: int, stopped_at: int | None = None,
                   schedule: str = "cosine", decay_start: int | None = None,
                   long_start: int | None = None) -> list[str]:
    """The given argv with the time-dependent flags (--minutes) replaced by the schedule
    actually run: --steps, --schedule/--decay-start and, if stopped early, --stop-after."""
    out, skip = [], False
    for x in argv:
        if skip:
            skip = False
            continue
        if x in SCHEDULE_FLAGS:
            skip = True
            continue
        if x.startswith(tuple(f + "=" for f in SCHEDULE_FLAGS)):
            continue
        out.append(x)
    if schedule != "cosine":
        out += ["--schedule", schedule]
        if decay_start is not None:
            out += ["--decay-start", str(decay_start)]
    if long_start is not None:
        out += ["--long-start", str(long_start)]
    out += ["--steps", str(steps)]
    if stopped_at is not None and stopped_at < steps:
        out += ["--stop-after", str(stopped_at)]
    return out
