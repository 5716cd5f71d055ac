"""Example prompt pairs for activation patching, and whether a model actually solves each one.

A pair is *solved* by a model when, at the position read (the last), the clean run prefers the
answer (LD_clean > 0), the corrupted run does not (LD_corrupted ≤ 0), and the gap
LD_clean − LD_corrupted is at least :data:`MARGIN` logits (:func:`attnkit.patching.solves`, the one
definition). A patching map normalised by a pair the model does not solve is noise, and no circuit's share
is claimed on it; :func:`check_pair` says why in one line, :func:`ordered` lists the solved examples first
and :func:`pick_default` offers the first solved one (the model's preferred one when it solves it: the
repeated phrase for attnkit-tiny, the indirect object for GPT-2).

A planted-circuit model (:data:`attnkit.loading.PLANTED_MODELS`) reads only the words ``t0`` … ``t39``, so
it gets its own example (:data:`MODEL_EXAMPLES`): the first prompt pair that ``calibrate`` builds for the
task its ``CIRCUIT.json`` states (repeated random tokens for induction), offered first on that model.

The seeds' 上海 sentence (Step by step): :func:`last_position_reading` says, per layer, how much of the last
position's attention each word gets (its tokens found by character span, :func:`attnkit.pieces.word_positions`) and
where the largest weight goes; :func:`reading_sentence` puts that layer's picture into one sentence.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import calibration
from .loading import CHINESE_MODEL, PLANTED_MODELS, SHIPPED
from .patching import MARGIN, Pair, PatchError, logit_diffs, make_pair, resolve_token, solves, two_token_weights
from .i18n import Message, join, msg
from .model import run
from .pieces import word_positions

__all__ = ["EXAMPLES", "CHINESE_EXAMPLES", "MODEL_EXAMPLES", "MARGIN", "PREFERRED", "CIRCUITS_PREFERRED", "FIELDS", "Check",
           "check_pair", "check_examples", "examples_for", "texts", "ordered", "pick_default", "EffectPair", "effect_pair",
           "matching_example", "LayerReading", "last_position_reading", "reading_sentence", "answer_note", "cat_question"]

#: The texts of an example (the keys of each entry of EXAMPLES).
FIELDS = ("clean", "corrupt", "answer", "distractor")

EXAMPLES = {
    msg("Indirect object, names swapped"): dict(
        clean="When Mary and John went to the store, John gave a drink to",
        corrupt="When John and Mary went to the store, Mary gave a drink to",
        answer=" Mary", distractor=" John"),
    msg("The animal … too tired / too wide"): dict(
        clean="The animal didn't cross the street because it was too tired. The tired one was the",
        corrupt="The animal didn't cross the street because it was too wide. The wide one was the",
        answer=" animal", distractor=" street"),
    msg("A repeated phrase"): dict(
        clean="Install the python package and the kernel source. Install the python package and the kernel",
        corrupt="Install the python package and the kernel binary. Install the python package and the kernel",
        answer=" source", distractor=" binary"),
    # the words before "ball" and "cup" swapped: "red" is now followed by "cup", so what changes is what the
    # induction heads' keys match on (the previous-token head's output) — the pair that exercises the
    # previous-token head → induction heads' keys path (in "A repeated phrase" the copied token changes
    # instead, and the previous-token head's output is the same in both prompts up to the change). attnkit-tiny
    # solves it (LD +10.48 clean, −4.50 corrupted); the earlier "kernel / module" swap below it does not (its
    # corrupted run still prefers the answer, +0.44)
    msg("A repeated phrase, match swapped"): dict(
        clean="Find the red ball and the green cup. Find the red",
        corrupt="Find the green ball and the red cup. Find the red",
        answer=" ball", distractor=" cup"),
    # the earlier swapped match, kept: README's first Circuits story and Heatmaps' "why" prompt; marked "(not solved)"
    # on attnkit-tiny, where no circuit share is claimed on it
    msg("A repeated phrase, match swapped (kernel / module)"): dict(
        clean="Install the kernel source and the module binary. Install the kernel",
        corrupt="Install the module source and the kernel binary. Install the kernel",
        answer=" source", distractor=" binary"),
}

#: The name of a planted task's example (``task`` of CIRCUIT.json; ``{shift}`` from it too).
TASK_EXAMPLES = {"induction": "Repeated random tokens (planted induction)",
                 "successor": "Token two back + {shift} (planted successor)"}


def _planted_examples() -> dict[str, dict[str, dict]]:
    """Planted model -> {example name: its texts}: calibrate's first pair for the model's stated task."""
    out = {}
    for model in PLANTED_MODELS:
        try:
            circuit = calibration.read_circuit(SHIPPED[model])
        except ValueError:                       # a planted folder not built (yet): no example
            continue
        name = TASK_EXAMPLES[circuit.task].format(shift=circuit.shift)
        pair = calibration.make_pairs(circuit, 1)[0]
        out[model] = {name: calibration.pair_words(pair)}
    return out


#: The Chinese model's own pairs (it was trained on Debian's Chinese package text): a repeated phrase whose copied
#: word changes, as "A repeated phrase" in English. attnkit-tiny-zh solves both (tests/test_examples.py); the
#: words are single tokens of its tokenizer. The English pairs are still offered after them.
CHINESE_EXAMPLES = {
    msg("A repeated phrase: software package and kernel"): dict(
        clean="安装软件包和内核源码。安装软件包和内核", corrupt="安装软件包和内核文件。安装软件包和内核",
        answer="源码", distractor="文件"),
    msg("A repeated phrase: system log and kernel"): dict(
        clean="查看系统日志和内核源码。查看系统日志和内核", corrupt="查看系统日志和内核文件。查看系统日志和内核",
        answer="源码", distractor="文件"),
}

#: Examples for one model only (by short name), offered before :data:`EXAMPLES` on that model.
MODEL_EXAMPLES = _planted_examples() | {CHINESE_MODEL: CHINESE_EXAMPLES}

#: The example offered first for a model (by name); a model not listed gets the first solved one.
PREFERRED = {"attnkit-tiny": "A repeated phrase", "gpt2": "Indirect object, names swapped",
             **{model: next(iter(own)) for model, own in MODEL_EXAMPLES.items()}}
#: The same on the Circuits page, whose path patching and discovery read the keys' path best on the swapped match
#: (offered first only where the model solves it, as every preferred example).
CIRCUITS_PREFERRED = PREFERRED | {"attnkit-tiny": "A repeated phrase, match swapped"}


@dataclass(frozen=True)
class Check:
    """How a model does on one pair: its logit differences at the position read, and a verdict."""
    name: str
    clean_ld: float | None = None
    corrupt_ld: float | None = None
    problem: str | None = None         # the pair cannot be made for this tokenizer (one line)
    margin: float = MARGIN

    @property
    def gap(self) -> float | None:
        return None if self.clean_ld is None else self.clean_ld - self.corrupt_ld

    @property
    def solved(self) -> bool:
        return self.problem is None and solves(self.clean_ld, self.corrupt_ld, self.margin)

    def warning(self) -> str | None:
        """One line when a map normalised by this pair should not be trusted, else None."""
        if self.problem is not None:
            return self.problem
        why = []
        if self.clean_ld <= 0:
            why.append(msg("the clean run does not prefer the answer (logit difference {ld})", ld=f"{self.clean_ld:+.2f}"))
        if self.corrupt_ld > 0:
            why.append(msg("the corrupted run also prefers the answer ({ld})", ld=f"{self.corrupt_ld:+.2f}"))
        if self.gap < self.margin:
            why.append(msg("the clean − corrupted gap is only {gap} (under {margin} logits)", gap=f"{self.gap:+.2f}",
                           margin=f"{self.margin:g}"))
        if not why:
            return None
        return msg("The model does not solve this pair: {why}. The normalised values below divide by that gap and are "
                   "mostly noise.", why=join(*why, sep="; "))

    def label(self) -> str:
        """The example's name, marked when the model does not solve it (a message: shown in the reader's language)."""
        return self.name if self.solved else msg("{name} (not solved)", name=self.name)


def _base(model_name) -> str:
    """A model's short name (a folder's last part: a planted model loaded from its folder is still itself)."""
    return str(model_name).rstrip("/").rsplit("/", 1)[-1]


def examples_for(model_name) -> dict[str, dict]:
    """The examples offered on ``model_name``: its own (:data:`MODEL_EXAMPLES`) first, then :data:`EXAMPLES`."""
    return MODEL_EXAMPLES.get(_base(model_name), {}) | EXAMPLES


def texts(name: str) -> dict | None:
    """The texts of the example called ``name`` (any model's), or None."""
    return EXAMPLES.get(name) or next((own[name] for own in MODEL_EXAMPLES.values() if name in own), None)


def check_pair(weights, pair: Pair, name: str = "", margin: float = MARGIN) -> Check:
    """Run both prompts once and judge the pair (logit differences at ``pair.pos``)."""
    w2 = two_token_weights(weights, pair.answer, pair.distractor)
    lds = [float(logit_diffs(run(w2, ids).logits, pair.pos)[0]) for ids in (pair.clean, pair.corrupt)]
    return Check(name, lds[0], lds[1], margin=margin)


def check_examples(model, examples: dict | None = None, margin: float = MARGIN,
                   bos: int | None = None) -> dict[str, Check]:
    """{name: Check} for every example offered on the model (``model``: a :class:`attnkit.loading.Loaded`;
    :func:`examples_for`); a pair the tokenizer cannot make (different lengths, a multi-token answer) gets its
    reason as ``problem``."""
    out = {}
    for name, ex in (examples_for(model.name) if examples is None else examples).items():
        try:
            pair = make_pair(model, ex["clean"], ex["corrupt"], ex["answer"], ex["distractor"], bos=bos)
        except PatchError as e:
            out[name] = Check(name, problem=msg("This tokenizer cannot make the pair: {why}.", why=str(e).split(' clean: ')[0]),
                              margin=margin)
            continue
        out[name] = check_pair(model.weights, pair, name, margin)
    return out


def ordered(model_name, checks: dict[str, Check], preferred_by_model: dict | None = None) -> list[str]:
    """The examples of ``checks`` in the order offered: the solved ones first (the model's preferred one, from
    ``preferred_by_model`` — default :data:`PREFERRED` — first among them), then those the model does not solve,
    then those its tokenizer cannot make; the registry's order otherwise."""
    preferred = (PREFERRED if preferred_by_model is None else preferred_by_model).get(_base(model_name))

    def rank(name: str) -> tuple:
        c = checks[name]
        return (not c.solved, c.problem is not None, name != preferred)

    return sorted(checks, key=rank)


def pick_default(model_name: str, checks: dict[str, Check], preferred_by_model: dict | None = None) -> str:
    """The example offered first: the first of :func:`ordered` — a solved one whenever the model solves any
    (its preferred one if it solves it), else the first the tokenizer can make (the page then warns); "" for
    no examples."""
    order = ordered(model_name, checks, preferred_by_model)
    return order[0] if order else ""


# ----------------------------------------------------------------------------- the seeds' 上海 sentence, read

@dataclass(frozen=True)
class LayerReading:
    """One layer's picture of the last position: each word's share of its attention (the mean over heads of the
    weights on the word's tokens; 0 for a word that is not in the text) and the key it weights most."""

    layer: int
    shares: dict[str, float]
    positions: dict[str, list[int]]
    top: int                 # the key position with the largest head-mean weight
    weight: float            # that weight


def last_position_reading(patterns, pieces: list[bytes], words) -> list[LayerReading]:
    """Per layer (``patterns``: one [H, T, T] pattern per layer), the last position's head-mean attention on each
    of ``words`` (tokens by character span: a word's tokens are every token holding part of it) and its top key."""
    where = {w: word_positions(pieces, w) for w in words}
    out = []
    for layer, p in enumerate(patterns):
        row = np.asarray(p, dtype=np.float64)[:, -1, :].mean(0)
        top = int(row.argmax())
        out.append(LayerReading(layer, {w: float(row[pos].sum()) if pos else 0.0 for w, pos in where.items()},
                                where, top, float(row[top])))
    return out


def _why_there(r: LayerReading, ids: list[int], labels: list[str]) -> Message:
    """What the top key is to the last position: itself, the token before, the token after an earlier occurrence of
    the last token (what an induction head looks up), part of a word, or nothing to name."""
    T, j = len(ids), r.top
    if j == T - 1:
        return msg("the last token itself")
    if j == T - 2:
        return msg("the token just before it")
    if j >= 1 and ids[j - 1] == ids[-1]:
        return msg("the token that followed an earlier {token} (position {prev}): the last token looks up what came "
                   "after its own earlier occurrence, as an induction head does", token=labels[j - 1], prev=j - 1)
    word = next((w for w, pos in r.positions.items() if j in pos), None)
    return msg("a token of {word}", word=word) if word else msg("a token of none of these words")


def reading_sentence(r: LayerReading, ids: list[int], labels: list[str], claim: str, percent) -> Message:
    """Layer ``r.layer``'s picture in one sentence, from its own numbers: which word gets the most, whether the
    seed's ``claim`` word beats the others in this layer, and where the largest weight goes (and what that key
    is). ``percent(p) -> str`` formats a share; ``labels``: the tokens as shown."""
    order = sorted(r.shares, key=r.shares.get, reverse=True)
    best = order[0]
    holds = all(r.shares[claim] > v for w, v in r.shares.items() if w != claim)
    verdict = (msg("{claim} gets more than each other word: the seed's picture holds in this layer", claim=claim)
               if holds else msg("{claim} does not get the most here ({best} does): the seed's picture does not hold "
                                 "in this layer", claim=claim, best=best))
    return msg("Layer {layer}: {shares} (together {total}); {verdict}. Its largest single weight, {weight}, goes to {token} at position "
               "{pos}, {what}.", layer=r.layer, shares=", ".join(f"{w} {percent(r.shares[w])}" for w in order),
               total=percent(sum(r.shares.values())), verdict=verdict, weight=percent(r.weight), token=labels[r.top], pos=r.top,
               what=_why_there(r, ids, labels))


def answer_note(model: str, layers: int, trained: int | None, preds, top: str, percent) -> Message:
    """What the model predicts after the 上海 sentence's 吃了 and why a small model is not expected to name the dish,
    from its numbers: ``preds`` (:func:`attnkit.attribution.next_tokens`, ``top`` the first as shown), ``trained``
    the tokens it was trained on (None: not known)."""
    size = (msg("a {layers}-layer model trained from scratch on {tokens} tokens of Debian package text",
                layers=layers, tokens=f"{trained:,}") if trained else msg("a {layers}-layer model", layers=layers))
    return msg("{model} predicts {top} first ({p}); its {k} likeliest tokens together hold {mass}. The seed's question "
               "(what was eaten in 上海) needs knowing 上海's food, and {size} has not learned such facts: it is not "
               "expected to answer. What it does show is where its attention looks (above).", model=model, top=top,
               p=percent(preds[0].prob), k=len(preds), mass=percent(sum(p.prob for p in preds)), size=size)


def cat_question(pieces: list[bytes]) -> tuple[int, list[int], Message] | None:
    """The 猫坐在垫子上 example's question under the causal mask: (the query — the last token of 垫子上 —, the
    positions of 坐, the sentence saying why 猫 cannot look at 垫子 and the question is asked backwards), or None
    when the sentence lacks one of the words. Words by character span (:func:`attnkit.pieces.word_positions`)."""
    cat, mat, sit, mat_on = (word_positions(pieces, w) for w in ("猫", "垫子", "坐", "垫子上"))
    if not (cat and mat and sit):
        return None
    return mat_on[-1], sit, msg(
        "Under the causal mask a token sees only itself and the tokens before it: 猫 (position {cat}) cannot see 垫子 "
        "(position {mat}), so 'does 猫 look at 垫子?' has no answer in this model. The question is asked from the later "
        "token back: from the last token of 垫子上 (position {q}) to 坐 (position {sit}).", cat=cat[0], mat=mat[0],
        q=mat_on[-1], sit=", ".join(map(str, sit)))


# ----------------------------------------------------------------------------- a pair to check one head's effect

@dataclass(frozen=True)
class EffectPair:
    """A clean/corrupted pair on which to measure one head's effect (activation patching): its texts
    (:data:`FIELDS`), and ``example``, the registry's example used when no corrupted prompt could be made from the
    text (else None)."""
    texts: dict
    example: str | None = None


def _top(logits: torch.Tensor, k: int) -> list[int]:
    return [int(i) for i in torch.topk(logits.float(), min(k, logits.shape[-1])).indices]


def _answer_pair(model, clean_ids: list, corrupt_ids: list, bos: int | None) -> tuple[str, str] | None:
    """(answer, distractor) as token texts: the clean run's top next token, and the corrupted run's (or, when they
    agree, the clean run's next best) — each one that reads back as that very token; None when none does."""
    pre = [] if bos is None else [bos]
    clean, corrupt = (run(model.weights, torch.tensor([pre + ids])).logits[0, -1] for ids in (clean_ids, corrupt_ids))
    special = set(getattr(model.tokenizer, "all_special_ids", []) or [])
    answers = [i for i in _top(clean, 4) if i not in special]
    for a in answers:
        for d in [i for i in _top(corrupt, 4) + answers if i != a and i not in special]:
            words = model.token_strs([a, d])
            if all(_reads_back(model, w, i) for w, i in zip(words, (a, d))):
                return words[0], words[1]
    return None


def _reads_back(model, word: str, i: int) -> bool:
    """Whether the pages read ``word`` as the answer or distractor token ``i`` (:func:`attnkit.patching.resolve_token`)."""
    try:
        return resolve_token(model, word)[0] == i
    except PatchError:
        return False


def _replacements(model, base: list, j: int, tries: int) -> list[list[int]]:
    """Prompts ``base`` with token ``j`` replaced by a word token of the same kind (a leading space or not, ASCII or
    not; no special token) — the prompt's other words first, then words of a seeded draw from the vocabulary — that the
    tokenizer reads back as exactly those ids (at most ``tries``)."""
    gen = torch.Generator().manual_seed(0)
    draw = torch.randperm(model.config.d_vocab, generator=gen)[: 64 * tries].tolist()
    special = set(getattr(model.tokenizer, "all_special_ids", []) or [])
    own = model.token_strs([base[j]])[0]
    out = []
    for r in dict.fromkeys([*base, *draw]):
        word = model.token_strs([r])[0]
        if (r == base[j] or r in special or word[:1].isspace() != own[:1].isspace() or not word.strip().isalnum()
                or word.isascii() != own.isascii()):
            continue
        new = base[:j] + [r] + base[j + 1:]
        if model.encode(model.tokenizer.decode(new, clean_up_tokenization_spaces=False)) == new:
            out.append(new)
        if len(out) >= tries:
            break
    return out


def effect_pair(model, text: str, layer: int, head: int, bos: int | None = None, tries: int = 6) -> EffectPair:
    """A pair on which patching shows whether head ``layer``/``head`` matters on ``text``: the clean prompt is the text;
    the corrupted one is the text with the token this head attends to most from the last position replaced (the
    next-most attended one when no replacement reads back as one token); the answer is the clean run's top next
    token, the distractor the corrupted run's. When none can be made (a one-token text, a tokenizer that will not
    read any replacement back), the model's first solved example (:func:`pick_default`) instead: ``example`` names
    it. ``model``: a :class:`attnkit.loading.Loaded`; ``bos``: a token put before both prompts, as on the pages."""
    base = model.encode(text)[: model.config.n_ctx - (bos is not None)]
    clean_text = text if len(base) == len(model.encode(text)) else \
        model.tokenizer.decode(base, clean_up_tokenization_spaces=False)
    if len(base) >= 2 and model.encode(clean_text) == base:
        ids = ([] if bos is None else [bos]) + base
        pattern = run(model.weights, torch.tensor([ids]), capture=["pattern"])["pattern", layer][0, head, -1]
        keys = [int(j) - len(ids) + len(base) for j in torch.argsort(pattern.float(), descending=True)]
        for j in [j for j in keys if j >= 0][:3]:
            for new in _replacements(model, base, j, tries):
                words = _answer_pair(model, base, new, bos)
                if words is not None:
                    corrupt = model.tokenizer.decode(new, clean_up_tokenization_spaces=False)
                    return EffectPair(dict(zip(FIELDS, (clean_text, corrupt, *words))))
    checks = check_examples(model, bos=bos)
    name = pick_default(model.name, checks)
    return EffectPair(dict(texts(name)), name)


def matching_example(texts_: dict) -> str | None:
    """The registry's example whose texts these are (any model's), or None."""
    every = {**EXAMPLES, **{n: ex for own in MODEL_EXAMPLES.values() for n, ex in own.items()}}
    return next((n for n, ex in every.items() if all(ex[f] == texts_.get(f) for f in FIELDS)), None)
