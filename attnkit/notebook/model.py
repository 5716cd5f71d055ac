"""The notebook API's model: :func:`load` a model by name or folder, :meth:`Model.run` a prompt with its activations
kept (a :class:`Run`, like TransformerLens's ``run_with_cache``), and every analysis of the dashboard as a method
returning a result (:mod:`attnkit.notebook.results`).

The methods call the library (``attnkit.metrics``, ``attnkit.patching``, …) with the model's weights; nothing is
computed here. The core's hook points stay what they are: ``run(..., hooks=..., intervention=...)`` passes them
through to :func:`attnkit.model.run`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .. import ablations, calibration, entropy, i18n, loading, metrics, patching, prompts, steps, verify
from ..attention import hidden_keys
from ..attribution import direct_logit_attribution, next_tokens
from ..circuits.compose import composition
from ..circuits.discover import discover
from ..eviction import ORIGINAL, eviction_lab
from ..model import Intervention, Trace, run
from ..score_terms import score_terms
from ..sinks import measure_sinks, text_windows
from ..standard import head_name, parse_head
from .atlas import Atlas
from .effects import Ablation, Attribution, Circuit, Composition, Patching, Verify, Why
from .patterns import CacheDemo, Entropy, HeadStats, Pattern
from .sinks import Eviction, Sinks

__all__ = ["load", "Model", "Run"]


def load(name: str = loading.SHIPPED_MODEL, device: str = "cpu", *, lang: str = i18n.DEFAULT) -> "Model":
    """Load a model: a shipped name (``attnkit-tiny``, ``attnkit-tiny-zh``, ``planted-induction``, …), a hub name
    (``gpt2``, ``owner/name``, ``owner/name@revision``) or a checkpoint folder. ``device``: cpu, cuda, mps or auto.
    ``lang``: the language of the results' summaries, tables and charts (``"en"`` or ``"zh"``).
    Raises :class:`attnkit.loading.LoadError` with a one-line reason."""
    return Model(loading.load(str(name), device), lang=i18n.parse_language(lang))


def _head(head, layer_head: int | None = None) -> tuple[int, int]:
    """``"L1H3"`` or (1, 3) -> (1, 3)."""
    if isinstance(head, str):
        return parse_head(head)
    if layer_head is None:
        raise TypeError("give a head as 'L1H3' or as layer, head")
    return int(head), int(layer_head)


class Model:
    """A loaded model (:func:`load`): its weights in attnkit's standard form, its tokenizer, and every analysis.

    ``m.run(prompt)`` keeps every activation; the analyses take prompts as text (or token ids) and return results
    with ``.to_pandas()``, ``.chart()``, ``.save(path)`` and a summary."""

    def __init__(self, loaded: loading.Loaded, lang: str = i18n.DEFAULT):
        self.loaded, self.lang = loaded, lang

    # ------------------------------------------------------------------ what it is
    @property
    def name(self) -> str:
        return self.loaded.name

    @property
    def config(self):
        """The standard :class:`~attnkit.weights.ModelConfig` (n_layers, n_heads, d_model, d_head, n_ctx, …)."""
        return self.loaded.config

    @property
    def weights(self):
        """The standard :class:`~attnkit.weights.Weights` (views of the HF model's parameters)."""
        return self.loaded.weights

    def __repr__(self) -> str:
        c = self.config
        return (f"Model({self.name!r}: {c.family}, {c.n_layers} layers × {c.n_heads} heads, d_model {c.d_model}, "
                f"{c.n_ctx:,} positions, {self.loaded.device})")

    # ------------------------------------------------------------------ tokens
    def to_ids(self, prompt) -> list[int]:
        """Token ids of ``prompt`` (text, or ids passed through); ValueError when empty or longer than the context."""
        ids = self.loaded.encode(prompt) if isinstance(prompt, str) else [int(i) for i in prompt]
        if not ids or len(ids) > self.config.n_ctx:
            raise ValueError(f"the prompt has {len(ids)} tokens; {self.name} takes 1 to {self.config.n_ctx}")
        return ids

    def to_tokens(self, prompt) -> list[str]:
        """The tokens as text (a character split over byte-level tokens reads e.g. ``床[1/2]``, ``床[2/2]``)."""
        return self.loaded.token_texts(self.to_ids(prompt))

    def _result(self, res):
        res.lang = self.lang
        return res

    # ------------------------------------------------------------------ one run, and what it shows
    def run(self, prompt, *, capture="all", hooks=None, intervention: Intervention | None = None) -> "Run":
        """Run ``prompt`` keeping the activations of ``capture`` (hook point names, or ``"all"``); ``hooks`` and
        ``intervention`` as in :func:`attnkit.model.run` (a hook ``fn(tensor, layer) -> tensor | None``)."""
        ids = self.to_ids(prompt)
        return Run(self, ids, run(self.weights, ids, capture=capture, hooks=hooks, intervention=intervention))

    def heads(self, text: str | None = None, *, induction_n: int = 50) -> HeadStats:
        """Every head statistic of the attention PATTERN on ``text`` (default: a built-in English paragraph; its first
        context when longer), and
        induction on ``induction_n`` random tokens repeated (and by TransformerLens's recipe when the model has a
        BOS token). They say where heads look, not what they do."""
        text = prompts.SAMPLE_TEXT if text is None else text
        ids, _ = prompts.truncate(self.loaded.encode(text) if isinstance(text, str) else list(text), self.config.n_ctx)
        ids = self.to_ids(ids)                          # the model's first context of it
        bos = getattr(self.loaded.tokenizer, "bos_token_id", None)
        return self._result(HeadStats(metrics.head_table(self.weights, ids, induction_n, bos_id=bos), len(ids)))

    def entropy(self, texts, *, window: int | None = None, split: bool = True) -> Entropy:
        """Entropy against context length over ``texts`` (a string or a list), each split into windows of ``window``
        tokens (default: the model's context) or, without ``split``, cut to its first window."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        window = self.config.n_ctx if window is None else min(int(window), self.config.n_ctx)
        docs, _ = entropy.documents(self.loaded.encode, texts, window, split=split)
        if not docs:
            raise ValueError("no text of 2 tokens or more to measure")
        return self._result(Entropy(entropy.profile_documents(self.weights, docs)))

    def ablate(self, kind: str, texts, *, heads=None, layers=None) -> Ablation:
        """Switch one design choice off and measure it against the unmodified model: ``kind`` is ``v=x``, ``wk=wq``,
        ``no-scale``, ``no-mask``, ``zero-head`` or ``mean-head``; ``heads`` (``["L1H3"]``, required for the head
        kinds) and ``layers`` (default: all) scope it; ``texts`` a string or a list."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        names = [head_name(*_head(h)) for h in (heads or [])]
        c = self.config
        spec = ablations.parse_spec(kind + (":" + ",".join(names) if names else ""), layers, c.n_layers, c.n_heads)
        ids = [self.to_ids(x) for x in texts]
        res = ablations.measure(self.weights, ids, spec)
        return self._result(Ablation(res, self.loaded.token_texts(ids[0]) if len(ids) == 1 else None))

    # ------------------------------------------------------------------ prompt pairs: effects
    def pair(self, clean: str, corrupt: str, answer: str, distractor: str, pos: int | None = None) -> patching.Pair:
        """A clean/corrupted prompt pair of equal token length, with the answer and distractor tokens (each one
        token; a word is tried with a leading space first). The metric is logit(answer) − logit(distractor) at
        ``pos`` (default: the last token)."""
        return patching.make_pair(self.loaded, clean, corrupt, answer, distractor, pos)

    def patch(self, pair: patching.Pair, target: str = "z", *, direction: str = "denoise",
              per_position: bool | None = None) -> Patching:
        """Activation patching on ``pair``: ``target`` is ``z`` (each head), ``resid``, ``attn`` or ``mlp``
        (each layer; per position by default); ``direction`` ``denoise`` (corrupted run, clean activation) or
        ``noise``."""
        per_position = target != "z" if per_position is None else per_position
        res = patching.patch(self.weights, pair, target, per_position=per_position, direction=direction)
        return self._result(Patching(res, self.loaded.token_texts(pair.clean)))

    def attribute(self, prompt, answer: str, distractor: str, *, pos: int = -1) -> Attribution:
        """Direct logit attribution of logit(answer) − logit(distractor) at ``pos`` on ``prompt``."""
        ids = self.to_ids(prompt)
        a, _, _ = patching.resolve_token(self.loaded, answer, "answer")
        d, _, _ = patching.resolve_token(self.loaded, distractor, "distractor")
        return self._result(Attribution(direct_logit_attribution(self.weights, ids, a, d, pos)))

    def composition(self) -> Composition:
        """Q-, K- and V-composition scores between every pair of heads in different layers (prompt-free)."""
        return self._result(Composition(composition(self.weights)))

    def circuit(self, pairs, *, target: float = 0.8, ablation: str = "resample", mlps: bool = True) -> Circuit:
        """Discover a circuit on one pair or a list: the fewest top edges (by edge attribution) whose faithfulness
        reaches ``target``, every other edge ablated (``resample``: its corrupted output; ``mean``)."""
        found = discover(self.weights, pairs, target, ablation=ablation, mlps=mlps)
        c = self.config
        return self._result(Circuit(found, c.n_layers, c.n_heads, self.stated_circuit(), c.group))

    def stated_circuit(self) -> calibration.StatedCircuit | None:
        """The circuit a planted model states (its CIRCUIT.json, checked against this model: ``.heads``, ``.edges``,
        ``.roles``, ``.task``), or None for any other model."""
        folder = calibration.planted_folder(self.loaded.source)
        return None if folder is None else calibration.read_circuit(folder, self.config)

    def planted_pairs(self, n: int = 4, seed: int = 0) -> list[patching.Pair]:
        """Prompt pairs for a planted model's task (clean: the behaviour; corrupted: fresh random tokens)."""
        stated = self.stated_circuit()
        if stated is None:
            raise ValueError(f"{self.name} is not a planted model (no CIRCUIT.json)")
        return calibration.make_pairs(stated, n=n, seed=seed)

    def atlas(self, corpus, *, out=None, max_docs: int | None = None, exclude_first: bool = False,
              effect_tokens: int | None = None, bootstrap: int = 1000, window: int | None = None,
              progress=None) -> Atlas:
        """The head atlas over ``corpus`` (a shipped corpus's name, ``"debian-man"``; a text file; a folder of them;
        the first ``max_docs`` documents): every head's statistics, its effect on the loss when mean-ablated and a
        verdict per role, as ``attnkit atlas`` computes them (``effect_tokens``: its effect sample, default the
        command's). Without ``out`` it is kept in attnkit's cache folder (the same atlas asked for again is read,
        not computed); ``out``: the atlas folder to write (new, empty, or one an atlas run wrote: it resumes).
        ``progress(done, total)``: documents over both passes."""
        from ..corpus import atlas_cache, load_atlas, run_atlas    # the corpus extra (pyarrow): only when asked

        settings = dict(max_docs=max_docs, no_first=exclude_first, bootstrap=bootstrap, window=window,
                        device=str(self.weights.device))
        if effect_tokens is not None:
            settings["effect_tokens"] = effect_tokens
        if out is None:
            res, folder = atlas_cache.cached_atlas(corpus, self.loaded.name, source=self.loaded.source,
                                                   progress=progress, **settings)
        else:
            folder = Path(out).expanduser()
            run_atlas(corpus, folder, self.loaded.name, progress=progress, **settings)
            res = load_atlas(folder)
        return self._result(Atlas(res, folder))

    # ------------------------------------------------------------------ explaining one score; checking
    def why(self, prompt, head, query: int = -1, key: int | None = None, *, against: int | None = None) -> Why:
        """Why does ``head`` (``"L1H3"``) attend from ``query`` to ``key``? Its score split into query-part ×
        key-part terms (``against``: the split of score(query, key) − score(query, against)); without ``key``
        the whole row. Positions are 0-based; negative ones count from the end."""
        ids = self.to_ids(prompt)
        T = len(ids)
        layer, h = _head(head)
        pos = [None if p is None else p % T for p in (query, key, against)]
        return self._result(Why(score_terms(self.weights, ids, layer, h, *pos), self.loaded.token_texts(ids)))

    def verify(self, prompt) -> Verify:
        """attnkit against HuggingFace on ``prompt``, layer by layer (float32 errors against float64)."""
        ids = self.to_ids(prompt)
        tokens = torch.tensor(ids, device=self.weights.device)
        rep = verify.compare(self.loaded.hf_model, self.weights, tokens, name=self.name)
        return self._result(Verify(rep))

    def kv_cache(self, prompt, n_new: int = 8) -> CacheDemo:
        """Greedy decoding of ``n_new`` tokens with and without the KV cache: the same tokens, less work."""
        return self._result(CacheDemo(steps.kv_cache_demo(self.weights, self.to_ids(prompt), n_new)))

    # ------------------------------------------------------------------ attention sinks and the evicting cache
    def _windows(self, text, tokens: int | None, context: int | None) -> list[list[int]]:
        """``text`` (a string or a list, each its own cache) cut into windows of ``context`` tokens (default and
        at most the model's context), its first ``tokens`` tokens in all."""
        size = self.config.n_ctx if context is None else min(int(context), self.config.n_ctx)
        docs, _ = text_windows(self.loaded.encode, text, size, tokens)
        if not docs:
            raise ValueError("no text of 2 tokens or more to measure")
        return docs

    def sinks(self, text, k: int = 4, *, tokens: int | None = None, context: int | None = None) -> Sinks:
        """Attention sinks on ``text`` (cut into windows of ``context`` tokens, each starting its own cache; its
        first ``tokens`` tokens): per head the share of attention on the first ``k`` tokens and on the first
        token, what the sink writes against the other keys, and the sink heads (``.heads()``)."""
        docs = self._windows(text, tokens, context)
        return self._result(Sinks(measure_sinks(self.weights, docs, k=int(k), model=self.name)))

    def eviction(self, text, sinks=(0, 1, 4), windows=(32, 64, 128, 256), *, modes=(ORIGINAL,),
                 tokens: int | None = None, context: int | None = None, resamples: int = 1000,
                 seed: int = 0) -> Eviction:
        """The loss on ``text`` when the KV cache keeps the first k tokens and the w most recent, for every k in
        ``sinks`` and w in ``windows``, beside the full cache, with 95 % block-bootstrap intervals and the verdict
        on "keeping the first tokens rescues a windowed cache". ``modes``: ``"original-positions"`` (the exact
        answer: keys keep their positions) and/or ``"rolling"`` (rotary models only; refused otherwise, with the
        reason in ``.lab.refused``)."""
        docs = self._windows(text, tokens, context)
        k = max(1, max(int(x) for x in sinks)) if sinks else 1
        stats = measure_sinks(self.weights, docs, k=k, model=self.name)
        lab = eviction_lab(self.weights, docs, sinks, windows, tuple(modes), resamples=resamples,
                           seed=seed, sink_stats=stats, model=self.name)
        return self._result(Eviction(lab))


@dataclass(repr=False)
class Run:
    """One prompt through the model with its activations kept (:meth:`Model.run`).

    ``run["pattern", 1]`` is layer 1's pattern ``[batch, heads, query, key]`` (batch 1), any hook point alike
    (``run["resid_post", 3]``, ``run["logits"]``); ``run.pattern("L1H3")`` is a result with a chart."""

    model: Model
    ids: list[int]
    trace: Trace

    @property
    def tokens(self) -> list[str]:
        return self.model.loaded.token_texts(self.ids)

    @property
    def logits(self) -> torch.Tensor:
        """[T, vocab]: the next-token logits at every position."""
        return self.trace.logits[0]

    def __getitem__(self, key):
        return self.trace[key]

    def __contains__(self, key) -> bool:
        return key in self.trace

    def pattern(self, head, head_index: int | None = None, *, kind: str = "pattern") -> Pattern:
        """One head's attention pattern (``kind="scores"``: before the softmax) as a chartable result; ``head`` is
        ``"L1H3"`` or a layer followed by ``head_index``."""
        layer, h = _head(head, head_index)
        if kind not in ("pattern", "scores"):
            raise ValueError(f"kind is 'pattern' or 'scores', not {kind!r}")
        values = self.trace[kind, layer][0, h].double().cpu().numpy()
        T = len(self.ids)
        masked = hidden_keys(T, window=self.model.config.window(layer)).cpu().numpy()
        return self.model._result(Pattern(head_name(layer, h), kind, values, self.tokens, masked))

    def predictions(self, k: int = 5, pos: int = -1) -> pd.DataFrame:
        """The ``k`` most likely next tokens after position ``pos``: rank, token, probability (0–1)."""
        ids = self.ids[: pos % len(self.ids) + 1]
        preds = next_tokens(self.model.weights, ids, lambda i: self.model.loaded.token_texts([int(i)])[0], k=k)
        return pd.DataFrame({"rank": np.arange(1, len(preds) + 1), "token": [p.token for p in preds],
                             "probability": [float(p.prob) for p in preds]})

    def __repr__(self) -> str:
        captured = sorted({n for n, _ in self.trace.captures})
        return f"Run({self.model.name!r}, {len(self.ids)} tokens, captured: {', '.join(captured) or 'none'})"
