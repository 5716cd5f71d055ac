"""Retrain the shipped ``attnkit-tiny`` model: ``python -m attnkit train-default``.

attnkit-tiny is a 4-layer, 8-head, 256-wide GPT-2 (``transformers.GPT2LMHeadModel``)
with 1,024 positions and a byte-level BPE tokenizer (vocab 8192) trained from
scratch on text that ships with Debian packages, so the dashboard works fully
offline. It is *not* OpenAI's GPT-2: no OpenAI weights or tokenizer files are used.

Corpus (Debian 12 "bookworm" packages, read from the local file system)
-----------------------------------------------------------------------
``SOURCES`` below lists each package, the paths read and its licence (see
/usr/share/doc/<pkg>/copyright); the model card records the versions and the
characters taken from each. Mostly English prose: the full ``fortunes`` set
(without the offensive one and ``ascii-art``), The Devil's Dictionary
(``dict-devil``), the Jargon File (``jargon-text``), WordNet's glosses that carry an
example sentence (``wordnet-base``); then documentation (Debian Handbook, FAQ and
Reference; the Python tutorial, FAQ and HOWTOs only) and Chinese (``fortunes-zh``).
Install them with::

    apt-get install fortunes fortunes-min fortunes-zh dict-devil jargon-text wordnet-base \
        debian-handbook debian-faq debian-reference-en python3.11-doc

Long files are cut into documents of at most ~4000 characters at paragraph
boundaries; every fortune is one document, 40 WordNet synsets are one document.
The documents are shuffled with the seed and every 50th document is held out as
the validation split. Documents are joined with ``<|endoftext|>`` like GPT-2.

Pipeline
--------
1. build the corpus (above), 2. train a byte-level BPE tokenizer with the
``tokenizers`` library (GPT-2 ByteLevel pre-tokenizer, ``<|endoftext|>`` as
bos/eos/unk; the words of ``REQUIRED_TOKENS`` boosted so they are single tokens)
and save it so ``AutoTokenizer.from_pretrained`` gives a GPT-2 fast tokenizer,
3. train ``GPT2LMHeadModel`` with AdamW, linear warmup + cosine (or
warmup-stable-decay) schedule, batches of random windows from the training stream,
optionally mixed with induction-friendly rows (``--text-repeat``: a span of natural
text repeated; ``--random-repeat``: a span of random tokens repeated), trained on
short windows (``--train-block``) with some rows at random position offsets
(``--pos-shift``) and on full-context windows from ``--long-start`` on,
4. save with ``save_pretrained(safe_serialization=True)``, evaluate on the whole
validation split (nats/token and bits per UTF-8 byte, optionally for an older model
too: ``--compare-with``) next to an add-one-smoothed unigram baseline, measure the
heads with attnkit's own metrics, and write ``MODEL_CARD.md``.

Everything is seeded (Python, NumPy-free, torch), so the same command on the same
machine and library versions reproduces the same weights. Examples::

    python -m attnkit train-default --out attnkit/models/attnkit-tiny --steps 1800
    python -m attnkit train-default --tiny-test --out /tmp/tiny   # seconds, for tests

``--minutes M`` makes a time-boxed run (warmup-stable-decay schedule whose decay
start, long-window start and length are chosen from the measured speed, with a
hard stop at M minutes); the model card then records the equivalent fixed command
(``--schedule wsd --decay-start D [--long-start S] --steps T [--stop-after N]``),
which replays the run exactly. SIGUSR1 stops training after the current step
(recorded the same way).
"""
from __future__ import annotations

import glob
import json
import math
import os
import random
import re
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent / "models" / "attnkit-tiny"
EOT = "<|endoftext|>"
VAL_EVERY = 50
MAX_DOC_CHARS = 4000

FORTUNES = "/usr/share/games/fortunes"
#: the English files of the ``fortunes`` package (fortune-mod's full set, not the offensive one;
#: ``ascii-art`` left out: pictures, not text)
FORTUNE_FILES = ["art", "computers", "cookie", "debian", "definitions", "disclaimer", "drugs", "education",
                 "ethnic", "food", "goedel", "humorists", "kids", "knghtbrd", "law", "linux", "linuxcookie",
                 "love", "magic", "medicine", "men-women", "miscellaneous", "news", "paradoxum", "people",
                 "perl", "pets", "platitudes", "politics", "pratchett", "science", "songs-poems", "sports",
                 "startrek", "tao", "translate-me", "wisdom", "work", "zippy"]
PYDOC = "/usr/share/doc/python3.11/html/_sources"
WORDNET = "/usr/share/wordnet"
SOURCES = [
    # (apt package, licence, glob patterns, kind)
    ("fortunes", "BSD-3-Clause (Regents of the University of California)",
     [f"{FORTUNES}/{f}" for f in FORTUNE_FILES], "fortune"),
    ("fortunes-min", "BSD-3-Clause (Regents of the University of California)",
     [f"{FORTUNES}/fortunes", f"{FORTUNES}/literature", f"{FORTUNES}/riddles"], "fortune"),
    ("dict-devil", "public domain (Ambrose Bierce, The Devil's Dictionary, 1911)",
     ["/usr/share/dictd/devil.dict.dz"], "gz"),
    ("jargon-text", "public domain (the Jargon File 4.4.7)",
     ["/usr/share/doc/jargon-text/jargon.txt.gz"], "gz"),
    ("wordnet-base", "WordNet 3.0 licence (Princeton University; permissive, BSD-like)",
     [f"{WORDNET}/data.noun", f"{WORDNET}/data.verb", f"{WORDNET}/data.adj", f"{WORDNET}/data.adv"],
     "wordnet"),
    ("debian-handbook", "GPL-2.0+ or CC-BY-SA-3.0 (Raphaël Hertzog, Roland Mas)",
     ["/usr/share/doc/debian-handbook/html/en-US/*.html"], "html"),
    ("debian-faq", "verbatim/modified copies permitted (Software in the Public Interest)",
     ["/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz"], "gz"),
    ("debian-reference-en", "GPL-2+ (Osamu Aoki)",
     ["/usr/share/debian-reference/*.en.html"], "html"),
    ("python3.11-doc", "Python License (PSF License Version 2)",
     [f"{PYDOC}/tutorial/*.txt", f"{PYDOC}/faq/*.txt", f"{PYDOC}/howto/*.txt"], "text"),
    ("fortunes-zh", "GPL-3.0+ (Yu Guanghui)",
     [f"{FORTUNES}/chinese", f"{FORTUNES}/tang300", f"{FORTUNES}/song100"], "fortune"),
]

#: words that must be single tokens with their leading space (the default prompt's words, the
#: names the seeds' examples use). The tokenizer's training texts get each of them
#: ``REQUIRED_BOOST`` extra times, so BPE merges them whatever their count in the corpus.
REQUIRED_TOKENS = ["The", " animal", " didn", "'t", " cross", " the", " street", " because", " it",
                   " was", " too", " tired", " Mary", " John", " store", " went", " to", " gave",
                   " a", " drink", " When", " and"]
REQUIRED_BOOST = 3000

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# --------------------------------------------------------------------------- corpus
class _HTMLText(HTMLParser):
    BLOCK = {"p", "div", "br", "li", "tr", "pre", "h1", "h2", "h3", "h4", "h5", "h6",
             "dt", "dd", "table", "title", "blockquote"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in {"script", "style"}:
            self.skip += 1
        elif tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in {"script", "style"}:
            self.skip = max(0, self.skip - 1)
        elif tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def html_to_text(raw: str) -> str:
    parser = _HTMLText()
    parser.feed(raw)
    text = "".join(parser.parts)
    text = re.sub(r"[ \t\r\f\v]+\n", "\n", text)
    text = re.sub(r"\n\t+", "\n", text)   # HTML source indentation (tabs), not content
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def chunk(text: str, max_chars: int = MAX_DOC_CHARS) -> list[str]:
    """Cut ``text`` into documents of at most ~max_chars at blank-line boundaries."""
    docs, cur, size = [], [], 0
    for para in re.split(r"\n\s*\n", text):
        para = para.strip("\n")
        if not para.strip():
            continue
        if cur and size + len(para) > max_chars:
            docs.append("\n\n".join(cur))
            cur, size = [], 0
        cur.append(para)
        size += len(para) + 2
    if cur:
        docs.append("\n\n".join(cur))
    return docs


def wordnet_lines(raw: str) -> list[str]:
    """``lemma, lemma: gloss; "example"`` for every WordNet synset whose gloss has an example sentence."""
    lines = []
    for line in raw.splitlines():
        if line.startswith("  ") or " | " not in line:
            continue
        head, gloss = line.split(" | ", 1)
        if '"' not in gloss:
            continue
        f = head.split()
        words = [re.sub(r"\(\w+\)$", "", f[4 + 2 * i]).replace("_", " ") for i in range(int(f[3], 16))]
        lines.append(f"{', '.join(dict.fromkeys(words))}: {gloss.strip()}")
    return lines


def read_source(kind: str, path: str) -> list[str]:
    if kind == "gz":
        import gzip
        return chunk(gzip.decompress(Path(path).read_bytes()).decode("utf-8", errors="replace"))
    raw = Path(path).read_text(encoding="utf-8", errors="replace")
    if kind == "wordnet":   # 40 synsets a document, in the file's (topical) order
        lines = wordnet_lines(raw)
        return ["\n".join(lines[i:i + 40]) for i in range(0, len(lines), 40)]
    if kind == "fortune":
        raw = ANSI.sub("", raw)
        return [d.strip("\n") for d in re.split(r"^%\s*$", raw, flags=re.M) if d.strip()]
    if kind == "html":
        return chunk(html_to_text(raw))
    return chunk(raw)


def collect_documents(corpus_file: str | None = None) -> list[tuple[str, str]]:
    """(source, text) pairs in a fixed order. ``corpus_file``: one text file, documents
    separated by blank lines (used by tests and for custom corpora)."""
    if corpus_file:
        text = Path(corpus_file).read_text(encoding="utf-8")
        return [("custom", d) for d in chunk(text, max_chars=1)]
    docs = []
    for package, _licence, patterns, kind in SOURCES:
        paths = sorted({p for pat in patterns for p in glob.glob(pat, recursive=True)})
        for path in paths:
            docs.extend((package, d) for d in read_source(kind, path))
    return docs


def build_corpus(seed: int, corpus_limit: int | None, corpus_file: str | None):
    docs = collect_documents(corpus_file)
    if not docs:
        raise SystemExit("attnkit train: no corpus found (install the Debian packages "
                         "listed in attnkit/train.py or pass --corpus-file)")
    random.Random(seed).shuffle(docs)
    if corpus_limit:
        kept, total = [], 0
        for d in docs:
            if total >= corpus_limit:
                break
            kept.append(d)
            total += len(d[1])
        docs = kept
    train = [d for i, d in enumerate(docs) if i % VAL_EVERY != VAL_EVERY - 1]
    val = [d for i, d in enumerate(docs) if i % VAL_EVERY == VAL_EVERY - 1]
    if not val:  # tiny corpora: still hold something out
        val = [docs[-1]]
        train = docs[:-1] or docs
    return train, val


# --------------------------------------------------------------------------- tokenizer
def train_tokenizer(texts: list[str], vocab_size: int, out: Path, max_len: int = 256, required: bool = True):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import GPT2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    boost = [" ".join(REQUIRED_TOKENS)] * REQUIRED_BOOST if required else []
    tok.train_from_iterator(list(texts) + boost, trainer=trainer, length=len(texts) + len(boost))
    out.mkdir(parents=True, exist_ok=True)
    hf = GPT2TokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT, unk_token=EOT,
                           add_prefix_space=False, clean_up_tokenization_spaces=False,
                           model_max_length=max_len)
    hf.save_pretrained(str(out))
    tok.model.save(str(out))  # vocab.json + merges.txt, like the original GPT-2 files
    return load_tokenizer(out)


def load_tokenizer(folder: Path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(folder))


def single_tokens(tokenizer, words=REQUIRED_TOKENS) -> list[str]:
    """The words of ``words`` that the tokenizer does *not* keep as one token."""
    return [w for w in words if len(tokenizer.encode(w, add_special_tokens=False)) != 1]


def round_trips(tokenizer, text: str) -> bool:
    ids = tokenizer.encode(text, add_special_tokens=False)
    return tokenizer.decode(ids, clean_up_tokenization_spaces=False) == text


ROUND_TRIP_SAMPLES = ["Attention lets every token look at its context.",
                      "注意力机制让每个词看见上下文", "🙂🚀", "  two  spaces\tand\ttabs\n"]


# --------------------------------------------------------------------------- model
def encode_stream(tokenizer, docs: list[tuple[str, str]]):
    import torch
    eot = tokenizer.convert_tokens_to_ids(EOT)
    enc = [e.ids for e in tokenizer.backend_tokenizer.encode_batch([d for _, d in docs],
                                                                   add_special_tokens=False)]
    ids = []
    for e in enc:
        ids.append(eot)
        ids.extend(e)
    ids.append(eot)
    return torch.tensor(ids, dtype=torch.long)


def unigram_baseline(train_ids, targets, vocab_size: int) -> float:
    """Cross-entropy (nats/token) of an add-one-smoothed unigram model fit on train."""
    import torch
    counts = torch.bincount(train_ids, minlength=vocab_size).double() + 1.0
    logp = counts.log() - counts.sum().log()
    return float(-logp[targets].mean())


def eval_windows(ids, block: int):
    """Non-overlapping (input, target) windows covering the whole stream."""
    n = (len(ids) - 1) // block
    x = ids[: n * block].view(n, block)
    y = ids[1: n * block + 1].view(n, block)
    rest = len(ids) - 1 - n * block
    extra = None
    if rest > 0:
        extra = (ids[n * block: n * block + rest].unsqueeze(0), ids[n * block + 1:].unsqueeze(0))
    return x, y, extra


def nll_sum(model, ids, block: int, batch: int = 16, skip_target: int | None = None) -> tuple[float, int]:
    """Summed cross-entropy (nats) over non-overlapping ``block`` windows covering ``ids``, and the
    number of targets scored (targets equal to ``skip_target`` are not scored)."""
    import torch
    import torch.nn.functional as F
    x, y, extra = eval_windows(ids, block)
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        chunks = [(x[i:i + batch], y[i:i + batch]) for i in range(0, len(x), batch)]
        if extra is not None:
            chunks.append(extra)
        for xb, yb in chunks:
            logits = model(input_ids=xb).logits
            if skip_target is not None:
                yb = yb.masked_fill(yb == skip_target, -100)
            total += float(F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="sum", ignore_index=-100))
            count += int((yb != -100).sum())
    model.train()
    return total, count


def full_loss(model, ids, block: int, batch: int = 16) -> float:
    total, count = nll_sum(model, ids, block, batch)
    return total / max(count, 1)


def bits_per_byte(model, tokenizer, docs: list[tuple[str, str]], block: int) -> float:
    """Bits per UTF-8 byte of ``docs`` (each after an ``<|endoftext|>``, in ``block``-token windows):
    the nats of every text token over ln 2 and the documents' byte count. Separators are given, not
    scored, so models with different tokenizers are compared on the same bytes."""
    ids = encode_stream(tokenizer, docs)
    eot = tokenizer.convert_tokens_to_ids(EOT)
    total, _ = nll_sum(model, ids, block, skip_target=eot)
    return total / math.log(2) / sum(len(d.encode("utf-8")) for _, d in docs)


def sample_batch(ids, batch: int, block: int, gen):
    import torch
    starts = torch.randint(0, len(ids) - block - 1, (batch,), generator=gen)
    offs = torch.arange(block + 1)
    w = ids[starts[:, None] + offs]
    return w[:, :-1], w[:, 1:]


SPAN = (8, 128)    # lengths of the repeated spans, at most half the window


def _span_range(block: int, span=SPAN) -> tuple[int, int]:
    """The lengths a repeated span can take in a window of ``block`` tokens (one full repeat must fit)."""
    hi = min(span[1], max(span[0], block // 2))
    return min(span[0], hi), hi


def sample_mixed_batch(ids, batch: int, block: int, gen, vocab: int, p_text_rep: float = 0.0,
                       p_rand_rep: float = 0.0, bos: int | None = None, p_shift: float = 0.0,
                       n_positions: int | None = None, span=SPAN):
    """Training rows: natural windows of ``ids``, or (with probability ``p_text_rep``) a span of
    natural text repeated until the window is full, or (``p_rand_rep``) a span of uniformly random
    tokens repeated (its first copy is not scored: it cannot be predicted). Repeat rows start with
    the bos token half of the time. A natural row gets a random position offset in
    [0, n_positions - block] with probability ``p_shift`` (trains the positions beyond ``block``).

    Returns (x, y, position_ids or None); y = -100 where not scored.
    """
    import torch
    x, y = sample_batch(ids, batch, block, gen)
    y = y.clone()
    u = torch.rand(batch, generator=gen)
    pos = None
    shift_max = (n_positions or block) - block
    for r in range(batch):
        kind = "text" if u[r] < p_text_rep else "rand" if u[r] < p_text_rep + p_rand_rep else "nat"
        if kind == "nat":
            if p_shift > 0 and shift_max > 0 and float(torch.rand(1, generator=gen)) < p_shift:
                if pos is None:
                    pos = torch.arange(block).repeat(batch, 1)
                pos[r] += int(torch.randint(0, shift_max + 1, (1,), generator=gen))
            continue
        lo, hi = _span_range(block, span)   # at least one full repeat fits in the window
        L = int(torch.randint(lo, hi + 1, (1,), generator=gen))
        if kind == "text":
            s0 = int(torch.randint(0, len(ids) - L, (1,), generator=gen))
            seg = ids[s0:s0 + L]
        else:
            seg = torch.randint(0, vocab, (L,), generator=gen)
        lead = [] if bos is None or float(torch.rand(1, generator=gen)) < 0.5 else [bos]
        w = torch.cat([torch.tensor(lead, dtype=torch.long), seg.repeat(block // L + 2)])[:block + 1]
        x[r], y[r] = w[:-1], w[1:]
        if kind == "rand":
            y[r, :len(lead) + L - 1] = -100
    return x, y, pos


def sinusoid_positions(n: int, d: int, std: float = 0.02):
    """[n, d] sin/cos position codes (Vaswani et al.), scaled to ``std`` per dimension."""
    import torch
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return pe * std * math.sqrt(2)


def lr_at(step: int, total: int, warmup: int, peak: float, floor_frac: float = 0.1,
          schedule: str = "cosine", decay_start: int | None = None) -> float:
    """Linear warmup, then cosine decay to floor_frac * peak at ``total`` ("cosine"), or
    constant until ``decay_start`` then linear decay to floor_frac * peak ("wsd")."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if schedule == "wsd":
        ds = int(0.8 * total) if decay_start is None else decay_start
        if step < ds:
            return peak
        prog = min(1.0, (step - ds) / max(1, total - ds))
        return peak * (floor_frac + (1 - floor_frac) * (1 - prog))
    prog = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor_frac + (1 - floor_frac) * 0.5 * (1 + math.cos(math.pi * prog)))


# --------------------------------------------------------------------------- head scores
def head_scores(model, vocab_size: int, val_ids=None, seed: int = 0, batch: int = 8,
                rep_len: int | None = None, bos_id: int | None = None):
    """Per (layer, head): previous-token and induction scores (eager attention).

    previous-token: mean over query positions i >= 1 of attention on i-1
    (on validation text windows, or random tokens when ``val_ids`` is None).
    induction: on random token sequences of length T repeated twice (after a BOS),
    mean attention from each position i of the second copy onto i-T+1, the token
    that followed the current token's earlier occurrence.
    """
    import torch
    n_pos = model.config.n_positions
    T = rep_len or (n_pos - 1) // 2
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    attn_impl = model.config._attn_implementation
    model.set_attn_implementation("eager")
    with torch.no_grad():
        if val_ids is not None and len(val_ids) > n_pos + 1:
            x, _ = sample_batch(val_ids, batch, n_pos, gen)
        else:
            x = torch.randint(0, vocab_size, (batch, n_pos), generator=gen)
        att = model(input_ids=x, output_attentions=True).attentions  # L x [B,H,S,S]
        prev = torch.stack([a.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2)) for a in att])

        low = 1 if bos_id == 0 else 0
        seq = torch.randint(low, vocab_size, (batch, T), generator=gen)
        parts = [seq, seq]
        off = 0
        if bos_id is not None:
            parts.insert(0, torch.full((batch, 1), bos_id, dtype=torch.long))
            off = 1
        rep = torch.cat(parts, dim=1)
        att = model(input_ids=rep, output_attentions=True).attentions
        q = torch.arange(off + T, off + 2 * T)
        k = q - T + 1
        ind = torch.stack([a[:, :, q, k].mean(dim=(0, 2)) for a in att])
    model.set_attn_implementation(attn_impl)
    model.train()
    return prev.tolist(), ind.tolist()


def format_head_table(prev, ind) -> str:
    lines = ["layer head  prev-token  induction"]
    for layer, (pl, il) in enumerate(zip(prev, ind)):
        for head, (p, i) in enumerate(zip(pl, il)):
            lines.append(f"{layer:>5} {head:>4}  {p:>10.3f}  {i:>9.3f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- model card
def package_versions() -> dict[str, str]:
    import subprocess
    try:
        res = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Version}\\n"] + [s[0] for s in SOURCES],
                             capture_output=True, text=True, timeout=20)
        return dict(line.split(" ", 1) for line in res.stdout.splitlines() if " " in line)
    except (OSError, subprocess.SubprocessError):
        return {}


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
    return "\n".join(lines)


PROSE = ("fortunes", "fortunes-min", "dict-devil", "jargon-text", "wordnet-base")
DOCS = ("debian-handbook", "debian-faq", "debian-reference-en", "python3.11-doc")
HEADS_CMD = "python -m attnkit heads --model attnkit-tiny --top 3 --markdown"


def head_report(folder: Path, top: int = 3) -> tuple[str, dict]:
    """Markdown tables of the best heads, measured by attnkit on the saved model exactly as
    ``python -m attnkit heads`` does (its built-in paragraph; induction on 4 x 50 random tokens
    repeated, and TransformerLens's recipe), and the best score per statistic."""
    from .loading import load
    from .metrics import _DEFAULT_TEXT, _markdown, head_table
    from .prompts import truncate

    m = load(str(folder), "cpu")
    ids, _ = truncate(m.encode(_DEFAULT_TEXT), m.config.n_ctx)
    df = head_table(m.weights, ids, 50, bos_id=m.tokenizer.bos_token_id)
    parts, best = [], {}
    for stat in ("previous-token", "first-token", "self", "duplicate-token", "induction",
                 "induction (random repeats)", "induction (TL recipe)"):
        top_df = df.nlargest(top, stat)[["layer", "head", stat]]
        best[stat] = {"layer": int(top_df.iloc[0]["layer"]), "head": int(top_df.iloc[0]["head"]),
                      "score": float(top_df.iloc[0][stat])}
        parts.append(f"best heads by {stat}:\n{_markdown(top_df)}")
    sinks = df[df["first-token"] >= 0.5]   # attention sinks: half or more of the mass on position 0
    best["sink_heads"] = [(int(l), int(h), float(f))
                          for l, h, f in zip(sinks["layer"], sinks["head"], sinks["first-token"])]
    return "\n\n".join(parts), best


def _add_head_section(out: Path, info: dict) -> None:
    """Measure the saved model's heads and put the card's *Head structure* text into ``info``."""
    try:
        report, best = head_report(out)
        info["head_report"] = (f"Per-head scores computed by attnkit (`attnkit.metrics`, from attnkit's own patterns),\n"
                               f"measured after training with\n\n```\n{HEADS_CMD}\n```\n\non its built-in English "
                               "paragraph and, for the induction tables, on 4 sequences of 50 random tokens repeated "
                               "twice (attnkit's recipe: queries in the second copy only) and on 10 sequences of a BOS "
                               "token + 50 random tokens repeated twice, averaged over the whole offset diagonal "
                               "(TransformerLens's recipe; at most 50/52 = 0.96). Scores are fractions of attention "
                               "mass (see `attnkit.metrics.HEAD_STATS`).\n\n" + report + "\n\n" + _sink_text(best)
                               + "\n\n" + _targets_text(best))
        info["best_heads"] = best
    except Exception as e:  # noqa: BLE001 - the card must still be written
        print(f"head report failed: {e.__class__.__name__}: {e}", flush=True)


def write_card(out: Path, info: dict) -> None:
    vers = info.get("package_versions", {})
    src_rows = "\n".join(
        f"| `{pkg}` {vers.get(pkg, '')} | {', '.join('`' + p + '`' for p in pats)} | {lic} | "
        f"{info['source_chars'].get(pkg, 0):,} |"
        for pkg, lic, pats, _ in SOURCES)
    if info.get("corpus_file"):
        src_rows = f"| (custom) | `{info['corpus_file']}` | see file | {info['corpus_chars']:,} |"
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
    card = f"""# attnkit-tiny

A tiny GPT-2-architecture language model trained from scratch by
`attnkit/train.py`, shipped inside the `attnkit` package so the dashboard works
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
  the run stops if any of them is split.

## Training corpus

Text shipped by Debian 12 packages, read from the local file system:

| apt package, version | paths | licence (`/usr/share/doc/<pkg>/copyright`) | characters |
|---|---|---|---|
{src_rows}

`debian-reference-en` HTML is converted to plain text (tags stripped); ANSI colour
codes are removed from the fortunes. Long files are cut into documents of at most
~{MAX_DOC_CHARS} characters at paragraph boundaries, each fortune is one document.
Documents are shuffled (seed {info['seed']}) and every {VAL_EVERY}th is held out for validation.
{_share_text(info)}

- documents: {info['n_train_docs']:,} train / {info['n_val_docs']:,} validation
- characters: {info['corpus_chars']:,}
- tokens: {info['train_tokens']:,} train / {info['val_tokens']:,} validation

## Training

AdamW (betas 0.9/0.95, weight decay {info['weight_decay']} on matrices), peak LR {info['lr']},
{sched_text}, gradient clipping 1.0,
batches of {info['batch']} random {info.get('short_block', c['n_positions'])}-token windows, {info['steps']:,} steps{sched},
seed {info['seed']}, {info['threads']} CPU thread(s), {_precision_text(info)}.{_last_stage_note(info)}
{_mixture_text(info)}{_formation_text(info)}

- tokens seen: {info['tokens_seen']:,} (about {info['epochs']:.2f} epochs of the training split)
- wall time: {info['train_seconds'] / 60:.1f} min ({info['tokens_per_s']:,.0f} tokens/s on CPU)

| cross-entropy (nats/token) | train | validation |
|---|---|---|
| attnkit-tiny | {info['final_train_loss']:.3f} | {info['final_val_loss']:.3f} |
| unigram baseline (add-one smoothed train counts) | {info['unigram_train']:.3f} | {info['unigram_val']:.3f} |

Model losses are measured after training in non-overlapping {c['n_positions']}-token windows over
the whole validation split and over a fixed {info['train_eval_tokens']:,}-token slice of the training
split; the unigram baseline is scored on exactly the same target tokens.
Validation perplexity: {math.exp(info['final_val_loss']):.1f} (unigram: {math.exp(info['unigram_val']):.1f}).{_short_loss_text(info)}

{_bpb_text(info)}

## Head structure

{info.get('head_report') or '_Run `' + HEADS_CMD + '` for the per-head scores._'}

## Reproduce

{_stages_text(info)}

Library versions used: torch {info['versions']['torch']}, transformers {info['versions']['transformers']},
tokenizers {info['versions']['tokenizers']}, Python {info['versions']['python']}.
The same command with the same versions and Debian package versions reproduces the weights
(CPU float32; results may differ across CPUs or library versions at the last digits).
"""
    (out / "MODEL_CARD.md").write_text(card, encoding="utf-8")


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
    return (f"By characters: {prose:.0%} English prose and glosses (fortunes, The Devil's Dictionary, the Jargon\n"
            f"File, WordNet's glosses with their example sentences), {docs:.0%} documentation (Debian\n"
            f"Handbook, FAQ and Reference, the Python tutorial, FAQ and HOWTOs; "
            f"{sc.get('python3.11-doc', 0) / total:.0%} Python),\n{zh:.0%} Chinese (fortunes-zh).")


def _sink_text(best: dict) -> str:
    sinks = best.get("sink_heads") or []
    if not sinks:
        return "First-token (attention sink) heads: none puts half or more of its attention on position 0."
    return ("First-token (attention sink) heads, half or more of their attention on position 0: "
            + ", ".join(f"layer {l} head {h} ({f:.2f})" for l, h, f in sinks) + ".")


#: What the shipped model is meant to show (issue 14): heads a researcher recognises from real GPT-2.
HEAD_TARGETS = {"previous-token": 0.7, "induction (random repeats)": 0.5, "induction (TL recipe)": 0.5}


def _targets_text(best: dict) -> str:
    rows = []
    for stat, target in HEAD_TARGETS.items():
        b = best.get(stat)
        if b is None:
            continue
        ok = "met" if b["score"] >= target else "**not met**"
        rows.append(f"| {stat} | ≥ {target} | {b['score']:.3f} (layer {b['layer']} head {b['head']}) | {ok} |")
    return ("Targets this model was trained for:\n\n| head | target | best reached | |\n|---|---|---|---|\n"
            + "\n".join(rows))


def _formation_text(info: dict) -> str:
    """When (in the last stage's log) the best induction score on random repeats first passed 0.1 and 0.5."""
    hist = info.get("history") or []
    stages = info.get("stages") or []
    before = sum(s_["steps"] for s_ in stages[:-1]) if len(stages) > 1 else 0
    tok_per_step = info["batch"] * info.get("short_block", info["config"]["n_positions"])
    firsts = {lv: next((i for i, h in enumerate(hist) if h.get("best_induction", 0) >= lv), None) for lv in (0.1, 0.5)}
    if firsts[0.1] is None:
        return ""
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
    lo, hi = _span_range(info.get("short_block") or info["config"]["n_positions"])
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
    rows = "\n".join(f"| {k} | {v:.3f} |" for k, v in bpb.items())
    return (f"Bits per UTF-8 byte on the validation split ({info.get('val_bytes', 0):,} bytes; every text "
            "token scored, the `<|endoftext|>` separators given but not scored), comparable across "
            f"tokenizers:\n\n| model | bits/byte |\n|---|---|\n{rows}")


# --------------------------------------------------------------------------- main
def parse_args(argv):
    from .cli import args as T

    p = T.Parser(prog="python -m attnkit train-default", description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(DEFAULT_OUT), type=T.writable_dir, help="output folder (default: the shipped model)")
    p.add_argument("--steps", type=T.positive_int, default=1800, help="optimizer steps (default 1800)")
    p.add_argument("--minutes", type=T.positive_float, default=None,
                   help="time-boxed run (implies --schedule wsd): constant LR until 80%% of the time, "
                        "then a linear decay sized to the measured speed; stops at the limit. "
                        "The card records the equivalent --steps/--decay-start/--stop-after")
    p.add_argument("--schedule", choices=["cosine", "wsd"], default="cosine",
                   help="cosine: warmup + cosine decay; wsd: warmup, constant, linear decay")
    p.add_argument("--decay-start", type=T.nonneg_int, default=None, help="wsd: step the decay starts (default 80%%)")
    p.add_argument("--stop-after", type=T.positive_int, default=None,
                   help="stop after this many steps; the LR schedule is still planned for --steps")
    p.add_argument("--init-from", default=None,
                   help="continue training the model in this folder (a later stage; its tokenizer is retrained "
                        "identically from the same corpus and seed and must match)")
    p.add_argument("--corpus-limit", type=T.positive_int, default=None, help="max characters of corpus")
    p.add_argument("--corpus-file", default=None, type=T.existing_nonempty_text_file, help="train on this text file instead of Debian text")
    p.add_argument("--seed", type=T.nonneg_int, default=1234)
    p.add_argument("--threads", type=T.positive_int, default=1, help="torch CPU threads")
    p.add_argument("--batch", type=T.positive_int, default=16)
    p.add_argument("--lr", type=T.positive_float, default=2e-3)
    p.add_argument("--warmup", type=T.nonneg_int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--vocab-size", type=T.positive_int, default=8192)
    p.add_argument("--n-layer", type=T.positive_int, default=4)
    p.add_argument("--n-head", type=T.positive_int, default=8)
    p.add_argument("--n-embd", type=T.positive_int, default=256)
    p.add_argument("--n-positions", type=T.int_at_least(2), default=256)
    p.add_argument("--eval-every", type=T.positive_int, default=100)
    p.add_argument("--train-block", type=T.int_at_least(2), default=None,
                   help="training window (default: --n-positions); windows of --n-positions from --long-start on")
    p.add_argument("--long-start", type=T.nonneg_int, default=None,
                   help="from this step on, train on --n-positions windows (batch scaled to keep tokens/step)")
    p.add_argument("--long-frac", type=T.positive_float, default=0.9,
                   help="with --minutes and --train-block: switch to long windows at this fraction of the time")
    p.add_argument("--text-repeat", type=float, default=0.0,
                   help="share of training rows that are a span of natural text repeated (induction-friendly)")
    p.add_argument("--random-repeat", type=float, default=0.0,
                   help="share of training rows that are a span of random tokens repeated")
    p.add_argument("--pos-shift", type=float, default=0.0,
                   help="share of natural short rows placed at a random position offset (trains later positions)")
    p.add_argument("--pos-init", choices=["gpt2", "sinusoid"], default="gpt2",
                   help="position embeddings at initialisation: GPT-2's N(0, 0.02), or sinusoids of the same "
                        "per-dimension scale (neighbouring positions start out similar; still learned)")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast for the training forward pass "
                   "(weights, optimizer and evaluation stay float32)")
    p.add_argument("--compare-with", default=None,
                   help="also measure this (older) model folder's bits per byte on the new validation text")
    p.add_argument("--tiny-test", action="store_true",
                   help="tiny model/corpus/steps for a seconds-long end-to-end test")
    p.add_argument("--card-only", action="store_true",
                   help="re-measure the heads of the model in --out and rewrite its MODEL_CARD.md from its "
                        "training_log.json (no training)")
    p.add_argument("--score-only", action="store_true",
                   help="only print head scores of the model already in --out")
    a = p.parse_args(argv)
    if a.card_only and not (Path(a.out) / "training_log.json").is_file():
        p.error(f"--card-only: {a.out} has no training_log.json (not a folder written by train-default)")
    if a.tiny_test:
        a.n_layer, a.n_head, a.n_embd, a.n_positions = 2, 2, 32, 32
        a.vocab_size = min(a.vocab_size, 400)
        a.steps, a.batch, a.warmup, a.eval_every = min(a.steps, 6), 4, 2, 3
        a.corpus_limit = a.corpus_limit or 200_000
        a.minutes = None
    return a


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


def cli(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    import tokenizers
    import torch
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(a.threads)
    out = Path(a.out)
    t_start = time.time()

    if a.card_only:   # re-measure the heads and rewrite MODEL_CARD.md from the saved training log
        log = out / "training_log.json"
        info = json.loads(log.read_text(encoding="utf-8"))
        _add_head_section(out, info)
        write_card(out, info)
        log.write_text(json.dumps(info, indent=1), encoding="utf-8")
        print(f"rewrote {out / 'MODEL_CARD.md'}")
        return 0
    if a.score_only:
        model = GPT2LMHeadModel.from_pretrained(str(out), attn_implementation="eager")
        tok = load_tokenizer(out)
        prev, ind = head_scores(model, len(tok), seed=a.seed, bos_id=tok.convert_tokens_to_ids(EOT))
        print(format_head_table(prev, ind))
        return 0

    random.seed(a.seed)
    torch.manual_seed(a.seed)

    train_docs, val_docs = build_corpus(a.seed, a.corpus_limit, a.corpus_file)
    all_docs = train_docs + val_docs
    source_chars: dict[str, int] = {}
    for s, d in all_docs:
        source_chars[s] = source_chars.get(s, 0) + len(d)
    corpus_chars = sum(source_chars.values())
    print(f"corpus: {len(train_docs)} train / {len(val_docs)} val documents, {corpus_chars:,} chars "
          + ", ".join(f"{k}={v:,}" for k, v in source_chars.items()), flush=True)

    t0 = time.time()
    tok = train_tokenizer([d for _, d in train_docs], a.vocab_size, out, a.n_positions)
    for s in ROUND_TRIP_SAMPLES:
        if not round_trips(tok, s):
            raise SystemExit(f"tokenizer does not round-trip {s!r}")
    split = single_tokens(tok) if not a.corpus_file else []
    if split:
        raise SystemExit(f"tokenizer splits required words: {split}")
    eot = tok.convert_tokens_to_ids(EOT)
    train_ids = encode_stream(tok, train_docs)
    val_ids = encode_stream(tok, val_docs)
    V = len(tok)
    print(f"tokenizer: {type(tok).__name__} vocab {V}, eot id {eot}; tokens {len(train_ids):,} train / "
          f"{len(val_ids):,} val ({time.time() - t0:.1f}s)", flush=True)

    block = a.n_positions
    short = min(a.train_block or block, block)
    long_start = a.long_start if short < block else None
    if len(val_ids) < block + 2:  # tiny corpora: borrow the tail of train for validation
        val_ids = train_ids[-(block + 2):]
    if len(train_ids) < block + 2:
        raise SystemExit("corpus too small for the context length")

    cfg = GPT2Config(n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd, n_positions=block,
                     vocab_size=V, bos_token_id=eot, eos_token_id=eot,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    stages = []
    if a.init_from:
        init = Path(a.init_from)
        model = GPT2LMHeadModel.from_pretrained(str(init))
        if model.config.vocab_size != V or model.config.n_positions != block:
            raise SystemExit(f"{init}: vocab/context {model.config.vocab_size}/{model.config.n_positions} "
                             f"do not match this run's {V}/{block}")
        prev_log = init / "training_log.json"
        if prev_log.is_file():
            prev = json.loads(prev_log.read_text(encoding="utf-8"))
            a.pos_init = prev.get("pos_init", "gpt2")   # how the first stage initialised positions
            stages = prev.get("stages") or [{"command": prev["command"], "steps": prev["steps"],
                                             "tokens_seen": prev["tokens_seen"],
                                             "train_seconds": prev["train_seconds"]}]
        print(f"stage {len(stages) + 1}: continuing from {init}", flush=True)
    else:
        model = GPT2LMHeadModel(cfg)
        if a.pos_init == "sinusoid":
            with torch.no_grad():
                model.transformer.wpe.weight.copy_(sinusoid_positions(block, a.n_embd, std=0.02))
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    n_params_non_emb = n_params - model.transformer.wte.weight.numel() - model.transformer.wpe.weight.numel()
    print(f"model: {n_params:,} params ({n_params_non_emb:,} non-embedding)", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(a.seed + 1000 * len(stages))   # later stages draw other batches
    eval_gen_seed = a.seed + 1
    import torch.nn.functional as F

    def quick_val() -> float:
        g = torch.Generator().manual_seed(eval_gen_seed)
        model.eval()
        with torch.no_grad():
            xb, yb = sample_batch(val_ids, 16, short, g)
            loss = F.cross_entropy(model(input_ids=xb).logits.flatten(0, 1), yb.flatten())
        model.train()
        return float(loss)

    total_steps = a.steps
    schedule = "wsd" if a.minutes is not None else a.schedule
    decay_start = a.decay_start if schedule == "wsd" else None
    if a.minutes is not None:
        total_steps, decay_start = 10**9, None  # fixed once 80% of the time has passed
        budget = a.minutes * 60 - (time.time() - t_start)
        print(f"--minutes {a.minutes}: {budget / 60:.1f} min of training", flush=True)
    slow = 1.0
    if a.minutes is not None and short < block:   # time a long step against a short one (no update)
        long_start = None
        def _timed(bsz, blk):
            xd = torch.zeros(bsz, blk, dtype=torch.long)
            t = time.time()
            for _ in range(2):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                    lg = model(input_ids=xd).logits
                F.cross_entropy(lg.float().flatten(0, 1), xd.flatten()).backward()
            model.zero_grad(set_to_none=True)
            return time.time() - t
        _timed(a.batch, short)
        slow = _timed(max(1, a.batch * short // block), block) / _timed(a.batch, short)
        print(f"a {block}-token step takes {slow:.2f}x a {short}-token step", flush=True)
        budget = a.minutes * 60 - (time.time() - t_start)
    stop_flag = []
    try:
        import signal
        signal.signal(signal.SIGUSR1, lambda *_: stop_flag.append(1))  # emergency stop
    except (ValueError, AttributeError, OSError):
        pass
    recent: list[float] = []
    history = []
    run_loss, run_n = 0.0, 0
    t_train = time.time()
    step = 0
    stop_at = total_steps if a.stop_after is None else min(a.stop_after, total_steps)
    while step < stop_at:
        now = time.time()
        recent = (recent + [now])[-101:]
        if a.minutes is not None:
            el = now - t_train
            if decay_start is None and el >= 0.8 * budget and len(recent) > 1:
                rate = (len(recent) - 1) / (recent[-1] - recent[0])  # steps/s, last <=100 steps
                decay_start = step
                if short < block:   # short windows until long_frac of the time, then long ones
                    t_long = max(el, a.long_frac * budget)
                    long_start = step + int((t_long - el) * rate * 0.97)
                    total_steps = long_start + max(1, int((budget - t_long) * rate / slow * 0.93))
                    print(f"time box: long windows from step {long_start}", flush=True)
                else:
                    total_steps = step + max(1, int((budget - el) * rate * 0.95))
                stop_at = total_steps
                print(f"time box: decay from step {decay_start} to {total_steps} "
                      f"({rate:.2f} steps/s)", flush=True)
            if el >= budget:
                print(f"time box: stopping after step {step}", flush=True)
                break
        if stop_flag:
            print(f"SIGUSR1: stopping after step {step}", flush=True)
            break
        lr = lr_at(step, total_steps, a.warmup, a.lr, schedule=schedule, decay_start=decay_start)
        for g_ in opt.param_groups:
            g_["lr"] = lr
        is_long = long_start is not None and step >= long_start
        blk = block if is_long else short
        bsz = max(1, a.batch * short // block) if is_long else a.batch
        xb, yb, pb = sample_mixed_batch(train_ids, bsz, blk, gen, V, a.text_repeat, a.random_repeat, eot,
                                        0.0 if is_long else a.pos_shift, block)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(input_ids=xb, position_ids=pb).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), yb.flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        run_loss += loss.item()
        run_n += 1
        if step % a.eval_every == 0 or step == stop_at or step == 1:
            el = time.time() - t_train
            vl = quick_val()
            tr = run_loss / run_n
            hp, hi = head_scores(model, V, val_ids=val_ids, seed=a.seed, batch=4, rep_len=min(50, (block - 1) // 2))
            bp, bi = max(max(r) for r in hp), max(max(r) for r in hi)
            history.append({"step": step, "train_loss": tr, "val_loss": vl, "lr": lr, "seconds": el,
                            "best_prev": bp, "best_induction": bi, "block": blk})
            print(f"step {step:>5}/{total_steps if total_steps < 10**9 else '?'} lr {lr:.2e} train {tr:.3f} val {vl:.3f} "
                  f"prev {bp:.2f} ind {bi:.2f} T={blk} {step * a.batch * short / el:,.0f} tok/s {el / 60:.1f} min",
                  flush=True)
            run_loss, run_n = 0.0, 0
    train_seconds = time.time() - t_train
    tokens_seen = step * a.batch * short

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)

    print("final evaluation over the whole splits ...", flush=True)
    val_loss = full_loss(model, val_ids, block)
    g = torch.Generator().manual_seed(a.seed + 2)  # train: a fixed sample as large as val (cheap)
    n_tr = min(len(train_ids) - 1, max(len(val_ids), 64 * block))
    start = int(torch.randint(0, len(train_ids) - n_tr, (1,), generator=g)) if len(train_ids) > n_tr + 1 else 0
    tr_slice = train_ids[start:start + n_tr + 1]
    train_loss = full_loss(model, tr_slice, block)
    _, vy, vextra = eval_windows(val_ids, block)
    vt = torch.cat([vy.flatten()] + ([vextra[1].flatten()] if vextra else []))
    _, ty, textra = eval_windows(tr_slice, block)
    tt = torch.cat([ty.flatten()] + ([textra[1].flatten()] if textra else []))
    uni_val = unigram_baseline(train_ids, vt, V)
    uni_train = unigram_baseline(train_ids, tt, V)
    print(f"final: train {train_loss:.4f} val {val_loss:.4f} | unigram train {uni_train:.4f} "
          f"val {uni_val:.4f} (nats/token)", flush=True)

    val_bytes = sum(len(d.encode("utf-8")) for _, d in val_docs)
    bpb = {f"attnkit-tiny ({block}-token windows)": bits_per_byte(model, tok, val_docs, block)}
    val_loss_short = full_loss(model, val_ids, short) if short < block else None
    if short < block:
        bpb[f"attnkit-tiny ({short}-token windows)"] = bits_per_byte(model, tok, val_docs, short)
    counts = torch.bincount(train_ids, minlength=V).double() + 1.0
    logp = counts.log() - counts.sum().log()
    vt_text = val_ids[1:][val_ids[1:] != eot]
    bpb["unigram baseline"] = float(-logp[vt_text].sum()) / math.log(2) / val_bytes
    if a.compare_with:
        old = GPT2LMHeadModel.from_pretrained(a.compare_with)
        old_tok = load_tokenizer(Path(a.compare_with))
        bpb[f"previous model ({a.compare_with}, {old.config.n_positions}-token windows)"] = bits_per_byte(
            old, old_tok, val_docs, old.config.n_positions)
        del old
    for k_, v_ in bpb.items():
        print(f"bits per byte on the validation text: {k_}: {v_:.4f}", flush=True)
    prev, ind = head_scores(model, V, val_ids=val_ids, seed=a.seed, bos_id=eot, rep_len=min(50, (block - 1) // 2))
    print("head scores (previous-token on validation text; induction on random repeated tokens):")
    print(format_head_table(prev, ind), flush=True)

    cmd = "python -m attnkit train-default " + " ".join(reproduce_argv(
        argv, total_steps if total_steps < 10**9 else step, step, schedule, decay_start,
        long_start if short < block else None))
    stages = stages + [{"command": cmd.strip(), "steps": step, "tokens_seen": tokens_seen,
                        "train_seconds": time.time() - t_train}]
    info = {
        "config": {"n_layer": a.n_layer, "n_head": a.n_head, "n_embd": a.n_embd,
                   "n_positions": block, "vocab_size": V},
        "n_params": n_params, "n_params_non_emb": n_params_non_emb, "eot_id": eot,
        "source_chars": source_chars, "package_versions": package_versions(),
        "train_eval_tokens": int(tt.numel()), "corpus_chars": corpus_chars, "corpus_file": a.corpus_file,
        "n_train_docs": len(train_docs), "n_val_docs": len(val_docs),
        "train_tokens": len(train_ids), "val_tokens": len(val_ids),
        "seed": a.seed, "lr": a.lr, "warmup": a.warmup, "weight_decay": a.weight_decay,
        "batch": a.batch, "steps": step, "threads": a.threads,
        "schedule_steps": total_steps if total_steps < 10**9 else step,
        "schedule": schedule, "decay_start": decay_start,
        "tokens_seen": tokens_seen, "epochs": tokens_seen / len(train_ids),
        "train_seconds": train_seconds, "tokens_per_s": tokens_seen / train_seconds,
        "final_train_loss": train_loss, "final_val_loss": val_loss, "val_loss_short": val_loss_short,
        "short_block": short, "long_start": long_start if short < block else None, "bits_per_byte": bpb,
        "val_bytes": val_bytes, "text_repeat": a.text_repeat, "random_repeat": a.random_repeat,
        "pos_shift": a.pos_shift, "bf16": a.bf16, "long_frac": a.long_frac, "pos_init": a.pos_init,
        "unigram_train": uni_train, "unigram_val": uni_val,
        "command": cmd.strip(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "python": sys.version.split()[0]},
        "history": history, "head_scores": {"previous_token": prev, "induction": ind},
        "stages": stages,
    }
    if len(stages) > 1:   # the card reports the whole training, every stage added up
        info["tokens_seen"] = sum(s_["tokens_seen"] for s_ in stages)
        info["epochs"] = info["tokens_seen"] / len(train_ids)
        info["train_seconds"] = sum(s_["train_seconds"] for s_ in stages)
        info["tokens_per_s"] = info["tokens_seen"] / info["train_seconds"]
    _add_head_section(out, info)
    write_card(out, info)
    (out / "training_log.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(f"saved to {out} ({time.time() - t_start:.0f}s total)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
