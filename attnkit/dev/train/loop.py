"""Training the shipped model: data, model, the optimisation loop (with its time box), the final
evaluation and the training log; :func:`train` runs them in order and writes the model folder."""
from __future__ import annotations

from contextlib import contextmanager
import json
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import tokenizers
import torch
from torch.nn import functional
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

from ...cli.outputs import swap_in
from .card import formation_text, head_section, reproduce_argv, write_card
from .evaluate import bits_per_byte, eval_windows, format_head_table, full_loss, prev_induction_scores, unigram_baseline
from .mixture import sample_batch, sample_mixed_batch
from .sources import EOT, TrainError, build_corpus, package_versions
from .snapshots import save_snapshot, write_series
from .tokenizer import (ROUND_TRIP_SAMPLES, encode_stream, load_tokenizer, required_tokens, round_trips, single_tokens,
                        train_tokenizer)

ZH_MIN_VOCAB = 4096
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "models" / "attnkit-tiny"


@dataclass
class Options:
    """Every setting of a training run (``python -m attnkit train-default`` has a flag for each)."""

    out: str | None = None                 # required; the shipped model's folder only with overwrite_shipped
    steps: int = 1800
    minutes: float | None = None
    schedule: str = "cosine"
    decay_start: int | None = None
    stop_after: int | None = None
    init_from: str | None = None
    corpus_limit: int | None = None
    corpus_file: str | None = None
    seed: int = 1234
    threads: int = 1
    batch: int = 16
    lr: float = 2e-3
    warmup: int = 100
    weight_decay: float = 0.1
    vocab_size: int = 8192
    n_layer: int = 4
    n_head: int = 8
    n_embd: int = 256
    n_positions: int = 256
    eval_every: int = 100
    train_block: int | None = None
    long_start: int | None = None
    long_frac: float = 0.9
    text_repeat: float = 0.0
    random_repeat: float = 0.0
    pos_shift: float = 0.0
    pos_init: str = "gpt2"
    bf16: bool = False
    compare_with: str | None = None
    overwrite_shipped: bool = False
    corpus: str = "en"                     # the source set: "en" (attnkit-tiny) or "zh" (attnkit-tiny-zh)
    snapshots: int = 0                     # keep this many snapshots as a series in out/steps (0: none)

    @classmethod
    def of(cls, obj) -> "Options":
        """The options an argparse namespace (or any object with these attributes) holds."""
        return cls(**{f.name: getattr(obj, f.name) for f in fields(cls)})


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


def sinusoid_positions(n: int, d: int, std: float = 0.02):
    """[n, d] sin/cos position codes (Vaswani et al.), scaled to ``std`` per dimension."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return pe * std * math.sqrt(2)


# --------------------------------------------------------------------------- data and model

@dataclass
class Data:
    """The corpus, its tokenizer and the token streams."""

    train_docs: list
    val_docs: list
    source_chars: dict
    tok: object
    eot: int
    train_ids: torch.Tensor
    val_ids: torch.Tensor

    @property
    def vocab(self) -> int:
        return len(self.tok)

    @property
    def corpus_chars(self) -> int:
        return sum(self.source_chars.values())


def prepare_data(o: Options, out: Path, log) -> Data:
    """Build the corpus, train the tokenizer into ``out`` (it must round-trip and keep the required
    words whole) and encode both splits."""
    train_docs, val_docs = build_corpus(o.seed, o.corpus_limit, o.corpus_file, o.corpus)
    source_chars: dict[str, int] = {}
    for s, d in train_docs + val_docs:
        source_chars[s] = source_chars.get(s, 0) + len(d)
    log(f"corpus: {len(train_docs)} train / {len(val_docs)} val documents, {sum(source_chars.values()):,} chars "
        + ", ".join(f"{k}={v:,}" for k, v in source_chars.items()))
    t0 = time.time()
    tok = train_tokenizer([d for _, d in train_docs], o.vocab_size, out, o.n_positions, required=o.corpus)
    # a vocabulary under ZH_MIN_VOCAB cannot hold the zh corpus's words beside the English ones (tests' tiny runs)
    required = o.corpus if o.vocab_size >= ZH_MIN_VOCAB or o.corpus == "en" else False
    for s in ROUND_TRIP_SAMPLES:
        if not round_trips(tok, s):
            raise TrainError(f"tokenizer does not round-trip {s!r}")
    split = single_tokens(tok, required_tokens(required)) if not o.corpus_file else []
    if split:
        raise TrainError(f"tokenizer splits required words: {split}")
    data = Data(train_docs, val_docs, source_chars, tok, tok.convert_tokens_to_ids(EOT),
                encode_stream(tok, train_docs), encode_stream(tok, val_docs))
    log(f"tokenizer: {type(tok).__name__} vocab {data.vocab}, eot id {data.eot}; tokens {len(data.train_ids):,} train / "
        f"{len(data.val_ids):,} val ({time.time() - t0:.1f}s)")
    return data


def build_model(o: Options, data: Data, block: int, log) -> tuple[GPT2LMHeadModel, list]:
    """A fresh GPT-2, or (``init_from``) the previous stage's model: (model, earlier stages)."""
    cfg = GPT2Config(n_layer=o.n_layer, n_head=o.n_head, n_embd=o.n_embd, n_positions=block,
                     vocab_size=data.vocab, bos_token_id=data.eot, eos_token_id=data.eot,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    stages = []
    if o.init_from:
        init = Path(o.init_from)
        try:
            model = GPT2LMHeadModel.from_pretrained(str(init), trust_remote_code=False, use_safetensors=True)
        except (OSError, ValueError, KeyError) as e:
            raise TrainError(f"--init-from {init}: not a GPT-2 folder with model.safetensors ({e})") from None
        if model.config.vocab_size != data.vocab or model.config.n_positions != block:
            raise TrainError(f"{init}: vocab/context {model.config.vocab_size}/{model.config.n_positions} "
                             f"do not match this run's {data.vocab}/{block}")
        prev_log = init / "training_log.json"
        if prev_log.is_file():
            prev = json.loads(prev_log.read_text(encoding="utf-8"))
            o.pos_init = prev.get("pos_init", "gpt2")   # how the first stage initialised positions
            stages = prev.get("stages") or [{"command": prev["command"], "steps": prev["steps"],
                                             "tokens_seen": prev["tokens_seen"],
                                             "train_seconds": prev["train_seconds"]}]
            stages[-1].setdefault("formation", formation_text(prev, record=True))   # a later log may not show it
        log(f"stage {len(stages) + 1}: continuing from {init}")
    else:
        model = GPT2LMHeadModel(cfg)
        if o.pos_init == "sinusoid":
            with torch.no_grad():
                model.transformer.wpe.weight.copy_(sinusoid_positions(block, o.n_embd, std=0.02))
    model.train()
    return model, stages


def optimizer(model, o: Options):
    """AdamW, weight decay on matrices but not on embeddings, norms and biases."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": o.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=o.lr, betas=(0.9, 0.95), eps=1e-8)


# --------------------------------------------------------------------------- the loop

@dataclass
class Schedule:
    """The steps the run plans and how; a time box (``--minutes``) fixes them as it goes."""

    block: int                         # the model's context: long windows
    short: int                         # the training window before ``long_start``
    schedule: str
    total_steps: int
    decay_start: int | None
    long_start: int | None
    stop_at: int
    budget: float | None = None        # seconds of training (time box)
    slow: float = 1.0                  # time of a long step over a short one (time box)


def plan(o: Options, model, block: int, short: int, t_start: float, log) -> Schedule:
    """The schedule of the run; with ``minutes``, open-ended until the time box picks the decay."""
    long_start = o.long_start if short < block else None
    schedule = "wsd" if o.minutes is not None else o.schedule
    p = Schedule(block, short, schedule, o.steps, o.decay_start if schedule == "wsd" else None, long_start, 0)
    if o.minutes is not None:
        p.total_steps, p.decay_start = 10**9, None  # fixed once 80% of the time has passed
        p.budget = o.minutes * 60 - (time.time() - t_start)
        log(f"--minutes {o.minutes}: {p.budget / 60:.1f} min of training")
    if o.minutes is not None and short < block:   # time a long step against a short one (no update)
        p.long_start = None
        _timed_steps(model, o, o.batch, short)
        p.slow = _timed_steps(model, o, max(1, o.batch * short // block), block) / _timed_steps(model, o, o.batch, short)
        log(f"a {block}-token step takes {p.slow:.2f}x a {short}-token step")
        p.budget = o.minutes * 60 - (time.time() - t_start)
    p.stop_at = p.total_steps if o.stop_after is None else min(o.stop_after, p.total_steps)
    return p


def _timed_steps(model, o: Options, bsz: int, blk: int) -> float:
    """Seconds of two forward + backward passes on a [bsz, blk] batch (gradients dropped)."""
    xd = torch.zeros(bsz, blk, dtype=torch.long)
    t = time.time()
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=o.bf16):
            lg = model(input_ids=xd).logits
        functional.cross_entropy(lg.float().flatten(0, 1), xd.flatten()).backward()
    model.zero_grad(set_to_none=True)
    return time.time() - t


def _time_box(p: Schedule, o: Options, step: int, recent: list, el: float, log) -> bool:
    """At 80 % of the time: fix the decay (and long-window) steps from the measured speed. True when
    the time is up."""
    if p.decay_start is None and el >= 0.8 * p.budget and len(recent) > 1:
        rate = (len(recent) - 1) / (recent[-1] - recent[0])  # steps/s, last <=100 steps
        p.decay_start = step
        if p.short < p.block:   # short windows until long_frac of the time, then long ones
            t_long = max(el, o.long_frac * p.budget)
            p.long_start = step + int((t_long - el) * rate * 0.97)
            p.total_steps = p.long_start + max(1, int((p.budget - t_long) * rate / p.slow * 0.93))
            log(f"time box: long windows from step {p.long_start}")
        else:
            p.total_steps = step + max(1, int((p.budget - el) * rate * 0.95))
        p.stop_at = p.total_steps
        log(f"time box: decay from step {p.decay_start} to {p.total_steps} ({rate:.2f} steps/s)")
    if el >= p.budget:
        log(f"time box: stopping after step {step}")
        return True
    return False


@dataclass
class Progress:
    """What the loop did: steps taken, the log every ``eval_every`` steps, training seconds."""

    step: int = 0
    history: list = field(default_factory=list)
    seconds: float = 0.0               # training alone
    started: float = 0.0               # time.time() when the loop began


def _quick_val(model, val_ids, short: int, seed: int) -> float:
    g = torch.Generator().manual_seed(seed)
    model.eval()
    with torch.no_grad():
        xb, yb = sample_batch(val_ids, 16, short, g)
        loss = functional.cross_entropy(model(input_ids=xb).logits.flatten(0, 1), yb.flatten())
    model.train()
    return float(loss)


def _step(model, opt, data: Data, o: Options, p: Schedule, gen, step: int) -> tuple[float, float, int]:
    """One optimizer step: (loss, learning rate, window length)."""
    lr = lr_at(step, p.total_steps, o.warmup, o.lr, schedule=p.schedule, decay_start=p.decay_start)
    for g_ in opt.param_groups:
        g_["lr"] = lr
    is_long = p.long_start is not None and step >= p.long_start
    blk = p.block if is_long else p.short
    bsz = max(1, o.batch * p.short // p.block) if is_long else o.batch
    for _ in range(100):        # a batch with no scored target (all rows' first copies) has no loss: draw again
        xb, yb, pb = sample_mixed_batch(data.train_ids, bsz, blk, gen, data.vocab, o.text_repeat,
                                        o.random_repeat, data.eot, 0.0 if is_long else o.pos_shift, p.block)
        if bool((yb != -100).any()):
            break
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=o.bf16):
        logits = model(input_ids=xb, position_ids=pb).logits
    loss = functional.cross_entropy(logits.float().flatten(0, 1), yb.flatten(), ignore_index=-100)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item(), lr, blk


def train_loop(model, opt, data: Data, o: Options, p: Schedule, gen, log, pool: Path | None = None) -> Progress:
    """Optimise until ``p.stop_at`` (or the time box, or SIGUSR1), logging every ``eval_every`` steps (and
    keeping a float16 snapshot in ``pool`` at each, when given). Under a time box, SIGUSR2 ends the
    constant phase now: the decay (and long windows) then take a quarter of the time trained so far."""
    stop_flag, finish_flag = [], []
    try:
        signal.signal(signal.SIGUSR1, lambda *_: stop_flag.append(1))  # emergency stop
        signal.signal(signal.SIGUSR2, lambda *_: finish_flag.append(1))  # finish early, with the decay
    except (ValueError, AttributeError, OSError):
        pass
    recent: list[float] = []
    run_loss, run_n = 0.0, 0
    t_train = time.time()
    pr = Progress(started=t_train)
    while pr.step < p.stop_at:
        now = time.time()
        recent = (recent + [now])[-101:]
        if finish_flag and p.budget is not None and p.decay_start is None:
            p.budget = min(p.budget, (now - t_train) / 0.8)
            log(f"SIGUSR2: finishing, {p.budget / 60:.1f} min of training in all")
            finish_flag.clear()
        if o.minutes is not None and _time_box(p, o, pr.step, recent, now - t_train, log):
            break
        if stop_flag:
            log(f"SIGUSR1: stopping after step {pr.step}")
            break
        loss, lr, blk = _step(model, opt, data, o, p, gen, pr.step)
        if not math.isfinite(loss):
            raise TrainError(f"training diverged at step {pr.step + 1} (loss {loss}); nothing was saved")
        pr.step += 1
        run_loss += loss
        run_n += 1
        if pr.step % o.eval_every == 0 or pr.step == p.stop_at or pr.step == 1:
            el = time.time() - t_train
            vl = _quick_val(model, data.val_ids, p.short, o.seed + 1)
            tr = run_loss / run_n
            hp, hi = prev_induction_scores(model, data.vocab, val_ids=data.val_ids, seed=o.seed, batch=4,
                                           rep_len=min(50, (p.block - 1) // 2))
            bp, bi = max(max(r) for r in hp), max(max(r) for r in hi)
            pr.history.append({"step": pr.step, "train_loss": tr, "val_loss": vl, "lr": lr, "seconds": el,
                               "best_prev": bp, "best_induction": bi, "block": blk})
            log(f"step {pr.step:>5}/{p.total_steps if p.total_steps < 10**9 else '?'} lr {lr:.2e} train {tr:.3f} "
                f"val {vl:.3f} prev {bp:.2f} ind {bi:.2f} T={blk} {pr.step * o.batch * p.short / el:,.0f} tok/s "
                f"{el / 60:.1f} min")
            run_loss, run_n = 0.0, 0
            if pool is not None:
                save_snapshot(model, pool, pr.step)
    pr.seconds = time.time() - t_train
    if not all(bool(torch.isfinite(q).all()) for q in model.parameters()):
        raise TrainError(f"training diverged: weights are NaN or infinite after step {pr.step}; nothing was saved")
    return pr


# --------------------------------------------------------------------------- after training

def final_evaluation(model, data: Data, o: Options, p: Schedule, log) -> dict:
    """Losses over the whole validation split and a fixed training slice, the unigram baseline on the
    same targets, and bits per byte (also of ``compare_with``'s model)."""
    block, short = p.block, p.short
    log("final evaluation over the whole splits ...")
    val_loss = full_loss(model, data.val_ids, block)
    g = torch.Generator().manual_seed(o.seed + 2)  # train: a fixed sample as large as val (cheap)
    train_ids = data.train_ids
    n_tr = min(len(train_ids) - 1, max(len(data.val_ids), 64 * block))
    start = int(torch.randint(0, len(train_ids) - n_tr, (1,), generator=g)) if len(train_ids) > n_tr + 1 else 0
    tr_slice = train_ids[start:start + n_tr + 1]
    train_loss = full_loss(model, tr_slice, block)
    _, vy, vextra = eval_windows(data.val_ids, block)
    vt = torch.cat([vy.flatten()] + ([vextra[1].flatten()] if vextra else []))
    _, ty, textra = eval_windows(tr_slice, block)
    tt = torch.cat([ty.flatten()] + ([textra[1].flatten()] if textra else []))
    ev = {"final_train_loss": train_loss, "final_val_loss": val_loss,
          "unigram_train": unigram_baseline(train_ids, tt, data.vocab),
          "unigram_val": unigram_baseline(train_ids, vt, data.vocab), "train_eval_tokens": int(tt.numel())}
    log(f"final: train {train_loss:.4f} val {val_loss:.4f} | unigram train {ev['unigram_train']:.4f} "
        f"val {ev['unigram_val']:.4f} (nats/token)")
    ev.update(_bits_per_byte(model, data, o, block, short, log))
    return ev


def _bits_per_byte(model, data: Data, o: Options, block: int, short: int, log) -> dict:
    val_bytes = sum(len(d.encode("utf-8")) for _, d in data.val_docs)
    bpb = {f"attnkit-tiny ({block}-token windows)": bits_per_byte(model, data.tok, data.val_docs, block)}
    val_loss_short = full_loss(model, data.val_ids, short) if short < block else None
    if short < block:
        bpb[f"attnkit-tiny ({short}-token windows)"] = bits_per_byte(model, data.tok, data.val_docs, short)
    counts = torch.bincount(data.train_ids, minlength=data.vocab).double() + 1.0
    logp = counts.log() - counts.sum().log()
    vt_text = data.val_ids[1:][data.val_ids[1:] != data.eot]
    bpb["unigram baseline"] = float(-logp[vt_text].sum()) / math.log(2) / val_bytes
    if o.compare_with:
        old = GPT2LMHeadModel.from_pretrained(o.compare_with, trust_remote_code=False, use_safetensors=True)
        old_tok = load_tokenizer(Path(o.compare_with))
        bpb[f"previous model ({o.compare_with}, {old.config.n_positions}-token windows)"] = bits_per_byte(
            old, old_tok, data.val_docs, old.config.n_positions)
        del old
    for k_, v_ in bpb.items():
        log(f"bits per byte on the validation text: {k_}: {v_:.4f}")
    return {"bits_per_byte": bpb, "val_bytes": val_bytes, "val_loss_short": val_loss_short,
            "val_chars": sum(len(d) for _, d in data.val_docs)}


def training_log(o: Options, data: Data, model, p: Schedule, pr: Progress, ev: dict, scores, stages, cmd) -> dict:
    """Everything the card and a later stage need (``training_log.json``)."""
    n_params = sum(q.numel() for q in model.parameters())
    tokens_seen = pr.step * o.batch * p.short
    info = {
        "config": {"n_layer": o.n_layer, "n_head": o.n_head, "n_embd": o.n_embd,
                   "n_positions": p.block, "vocab_size": data.vocab},
        "n_params": n_params,
        "n_params_non_emb": n_params - model.transformer.wte.weight.numel() - model.transformer.wpe.weight.numel(),
        "eot_id": data.eot,
        "source_chars": data.source_chars, "package_versions": package_versions(),
        "train_eval_tokens": ev["train_eval_tokens"], "corpus_chars": data.corpus_chars, "corpus_file": o.corpus_file,
        "n_train_docs": len(data.train_docs), "n_val_docs": len(data.val_docs),
        "train_tokens": len(data.train_ids), "val_tokens": len(data.val_ids),
        "seed": o.seed, "lr": o.lr, "warmup": o.warmup, "weight_decay": o.weight_decay,
        "batch": o.batch, "steps": pr.step, "threads": o.threads,
        "schedule_steps": p.total_steps if p.total_steps < 10**9 else pr.step,
        "schedule": p.schedule, "decay_start": p.decay_start,
        "tokens_seen": tokens_seen, "epochs": tokens_seen / len(data.train_ids),
        "train_seconds": pr.seconds, "tokens_per_s": tokens_seen / pr.seconds,
        "final_train_loss": ev["final_train_loss"], "final_val_loss": ev["final_val_loss"],
        "val_loss_short": ev["val_loss_short"],
        "short_block": p.short, "long_start": p.long_start if p.short < p.block else None,
        "bits_per_byte": ev["bits_per_byte"],
        "val_bytes": ev["val_bytes"], "val_chars": ev.get("val_chars"), "text_repeat": o.text_repeat, "random_repeat": o.random_repeat,
        "pos_shift": o.pos_shift, "bf16": o.bf16, "long_frac": o.long_frac, "pos_init": o.pos_init,
        "unigram_train": ev["unigram_train"], "unigram_val": ev["unigram_val"],
        "command": cmd, "corpus": o.corpus, "name": Path(o.out).name if o.out else "attnkit-tiny",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "python": sys.version.split()[0]},
        "history": pr.history, "head_scores": {"previous_token": scores[0], "induction": scores[1]},
        "stages": stages,
    }
    if len(stages) > 1:   # the card reports the whole training, every stage added up
        info["tokens_seen"] = sum(s_["tokens_seen"] for s_ in stages)
        info["epochs"] = info["tokens_seen"] / len(data.train_ids)
        info["train_seconds"] = sum(s_["train_seconds"] for s_ in stages)
        info["tokens_per_s"] = info["tokens_seen"] / info["train_seconds"]
    return info


def finish_card(out: Path, info: dict, log) -> None:
    """Measure the saved model's heads into ``info``, write MODEL_CARD.md and training_log.json."""
    failed = head_section(out, info)
    if failed:
        log(failed)
    write_card(out, info)
    (out / "training_log.json").write_text(json.dumps(info, indent=1), encoding="utf-8")


def check_out(out, overwrite_shipped: bool = False) -> Path:
    """``out`` as a folder training may write: TrainError for none, the shipped model's folder (unless
    ``overwrite_shipped``), or a folder that is not empty and was not written by train-default."""
    if not out:
        raise TrainError("no output folder: give --out (a new or empty folder)")
    out = Path(out).expanduser()
    if out.resolve() == DEFAULT_OUT.resolve() and not overwrite_shipped:
        raise TrainError(f"{out} is the shipped attnkit-tiny model; it is replaced only with --overwrite-shipped")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "training_log.json").is_file())):
        raise TrainError(f"{out} is not empty and was not written by train-default (no training_log.json); "
                         "give a new or empty folder")
    return out


def train(o: Options, argv: list[str], log=lambda s: None) -> dict:
    """The whole run into ``o.out`` (see check_out): corpus, tokenizer, model, loop, evaluation, head
    scores, card and log, written into a hidden folder beside ``o.out`` and moved there when complete
    (an interrupted or failed run leaves ``o.out`` as it was). ``argv`` (the command's flags) is
    recorded, with the schedule actually run, as the command that reproduces the run. Returns the
    training log; TrainError when the run cannot go on."""
    out = check_out(o.out, o.overwrite_shipped)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        info = _train_into(o, work, argv, log)
        swap_in(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"saved to {out}")
    return info


@contextmanager
def torch_threads(n: int):
    """torch's thread count set to ``n`` for the block, then put back: it changes float sums, and a caller in the
    same process (a test, a notebook) must not find its own setting changed afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _train_into(o: Options, out: Path, argv: list[str], log) -> dict:
    with torch_threads(o.threads):
        return _train_with_threads(o, out, argv, log)


def _train_with_threads(o: Options, out: Path, argv: list[str], log) -> dict:
    t_start = time.time()
    random.seed(o.seed)
    torch.manual_seed(o.seed)
    data = prepare_data(o, out, log)
    block = o.n_positions
    short = min(o.train_block or block, block)
    if len(data.val_ids) < block + 2:  # tiny corpora: borrow the tail of train for validation
        data.val_ids = data.train_ids[-(block + 2):]
    if len(data.train_ids) < block + 2:
        raise TrainError("corpus too small for the context length")
    model, stages = build_model(o, data, block, log)
    n_params = sum(q.numel() for q in model.parameters())
    log(f"model: {n_params:,} params "
        f"({n_params - model.transformer.wte.weight.numel() - model.transformer.wpe.weight.numel():,} non-embedding)")
    opt = optimizer(model, o)
    gen = torch.Generator().manual_seed(o.seed + 1000 * len(stages))   # later stages draw other batches
    p = plan(o, model, block, short, t_start, log)
    pool = out / ".snapshots" if o.snapshots else None
    pr = train_loop(model, opt, data, o, p, gen, log, pool)
    model.save_pretrained(str(out), safe_serialization=True)
    ev = final_evaluation(model, data, o, p, log)
    scores = prev_induction_scores(model, data.vocab, val_ids=data.val_ids, seed=o.seed, bos_id=data.eot,
                                   rep_len=min(50, (block - 1) // 2))
    log("head scores (previous-token on validation text; induction on random repeated tokens):")
    log(format_head_table(*scores))
    cmd = "python -m attnkit train-default " + " ".join(reproduce_argv(
        argv, p.total_steps if p.total_steps < 10**9 else pr.step, pr.step, p.schedule, p.decay_start,
        p.long_start if short < block else None))
    stages = stages + [{"command": cmd.strip(), "steps": pr.step, "tokens_seen": pr.step * o.batch * short,
                        "train_seconds": time.time() - pr.started}]
    info = training_log(o, data, model, p, pr, ev, scores, stages, cmd.strip())
    if pool is not None:
        if not pr.history or pr.history[-1]["step"] != pr.step:   # the final model is the series' last point
            save_snapshot(model, pool, pr.step)
            pr.history.append({"step": pr.step, "train_loss": info["final_train_loss"],
                               "val_loss": info["final_val_loss"], "best_prev": max(max(r) for r in scores[0]),
                               "best_induction": max(max(r) for r in scores[1])})
        info["series"] = write_series(pool, out, pr.history, o.snapshots, o.batch * short, log,
                                      short if short < block else None)
    finish_card(out, info, log)
    log(f"finished in {time.time() - t_start:.0f}s")
    return info


def rewrite_card(out: Path, threads: int = 1, log=lambda s: None) -> Path:
    """Re-measure the heads of the model in ``out`` and rewrite its MODEL_CARD.md from its
    training_log.json (no training); the card's path."""
    info = json.loads((out / "training_log.json").read_text(encoding="utf-8"))
    with torch_threads(threads):
        finish_card(out, info, log)
    return out / "MODEL_CARD.md"


def probe_saved(out: Path, seed: int = 1234, threads: int = 1) -> str:
    """The training probe's previous-token and induction table for the model saved in ``out``."""
    model = GPT2LMHeadModel.from_pretrained(str(out), attn_implementation="eager", trust_remote_code=False)
    tok = load_tokenizer(out)
    with torch_threads(threads):
        prev, ind = prev_induction_scores(model, len(tok), seed=seed, bos_id=tok.convert_tokens_to_ids(EOT))
    return format_head_table(prev, ind)
