"""The analyses a corpus run can do: a registry, one class per analysis (like the ablation kinds).

An :class:`Analysis` declares its ``name`` (as ``--analyses`` spells it), the ``table`` it writes
(``<out>/<table>/part-*.parquet`` per window, ``<out>/summary/<table>.parquet`` summarised), the
``columns`` of that table, the settings it owns, what it computes on a batch of windows and how its
rows are summarised over documents. Adding one is a class plus :func:`register`::

    class LastToken(Analysis):
        name, table, help = "last-token", "last_token", "per window, layer and head: attention on the last token"

        def columns(self):
            return LAYER_HEAD + [("last_token", pa.float64())]

        def compute(self, batch, hook=None, intervention=None):
            ...   # a forward pass on batch.ids; return {column: values} with one row per (window, layer, head)

    register(LastToken())

The head statistics come from :mod:`attnkit.metrics` (``HEAD_STATS``, ``head_scores``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from .. import ablations
from ..weights import head_name
from ..entropy import entropy_profile, sample_positions
from ..metrics import HEAD_STATS, head_scores
from ..model import Intervention
from ..bootstrap import Boot
from .inputs import CorpusError

__all__ = ["Analysis", "ANALYSES", "UNAVAILABLE", "register", "selected", "Windows", "SummaryInput",
           "KEY", "LAYER_HEAD", "ablation_loss", "check_ablation", "DEFAULT_ABLATIONS", "ENTROPY_BOOT_CELLS"]

#: Columns every per-window table starts with; per-head tables add layer and head.
KEY = [("doc", pa.int64()), ("window", pa.int32())]
LAYER_HEAD = KEY + [("layer", pa.int32()), ("head", pa.int32())]
#: The layer-wide ablations run by default (head ablations need a head: zero-head:L.H).
DEFAULT_ABLATIONS = ("v=x", "wk=wq", "no-scale", "no-mask")
#: Bootstrap cells (resamples × entropy cells) held at once: 25M doubles = 200 MB. With gpt2 small's 64
#: positions that is all 1000 resamples; gpt2-xl's entropy intervals use 156 (recorded in summary.json).
ENTROPY_BOOT_CELLS = 25_000_000
#: Asked for by name, but not something a corpus run can do; the reason is the message.
UNAVAILABLE = {"patching": "activation patching needs a clean/corrupted prompt pair with an answer token, and a "
                           "corpus holds single documents; patch pairs with python -m attnkit patch"}


@dataclass
class Windows:
    """One batch of equal-length windows: what an analysis computes on."""

    weights: object                # the model's Weights
    ids: torch.Tensor              # [B, T]
    docs: list                     # document index of each window
    nums: list                     # window number within its document
    tokens: list                   # each window's token ids (list of int)
    settings: dict                 # the run's checked settings
    pieces: object = None          # pieces(ids) -> readable token strings (the model's tokenizer), or None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(B windows, L layers, H heads, T tokens)."""
        c = self.weights.config
        return self.ids.shape[0], c.n_layers, c.n_heads, self.ids.shape[1]

    def per_head_key(self) -> dict:
        """doc, window, layer, head columns: one row per (window, layer, head), in that order."""
        B, L, H, _ = self.shape
        return {"doc": np.repeat(self.docs, L * H).tolist(), "window": np.repeat(self.nums, L * H).tolist(),
                "layer": np.tile(np.repeat(np.arange(L), H), B).tolist(), "head": np.tile(np.arange(H), B * L).tolist()}


@dataclass
class SummaryInput:
    """What an analysis summarises: its finished shards, and the documents' bootstrap weights."""

    settings: dict
    shards: list                   # finished shard numbers
    read: object                   # read(table, shard) -> pyarrow Table
    doc_index: object              # doc_index(doc ids) -> column of W (position among documents with windows)
    W: np.ndarray | None           # [resamples, documents]: how often each document is drawn, or None
    windows: pd.DataFrame          # every finished window (doc, window, start, tokens)
    n_layers: int
    n_heads: int
    level: float
    max_points: int


class Analysis:
    """One corpus analysis. Subclasses set ``name``, ``table``, ``help`` and implement :meth:`columns`,
    :meth:`compute` and :meth:`summarise`; the rest has defaults."""

    name = ""                      # as --analyses spells it
    table = ""                     # the Parquet table of its rows (and summary/<table>.parquet)
    help = ""                      # one line for --help
    sort = ("doc", "window", "layer", "head")   # row order within a shard
    #: Its computation is a forward pass on which other analyses' hooks ride (at most one per run does).
    carries_forward = False
    #: Settings it owns, with their value when it is not run (they enter the manifest).
    defaults: dict = {}
    #: Offered by the corpus command (False: run by another driver, as the atlas's two passes are).
    listed = True

    def columns(self) -> list:
        """[(column, pyarrow type)] of its table, the key columns first."""
        raise NotImplementedError

    def settings(self, raw: dict) -> dict:
        """Its checked settings from the raw ones (CorpusError when one is wrong)."""
        return {}

    def prepare(self, config, settings: dict) -> None:
        """Check its settings against the model (before any document is read); raise to refuse."""

    def hook(self, batch: Windows) -> Intervention | None:
        """An intervention to ride on the batch's forward pass (one is run when any analysis asks)."""
        return None

    def compute(self, batch: Windows, hook=None, intervention: Intervention | None = None) -> dict:
        """Its rows for the batch as {column: values}; ``hook`` is what :meth:`hook` returned, after the
        forward pass; ``intervention`` is given to the one analysis that ``carries_forward``."""
        raise NotImplementedError

    def summarise(self, s: SummaryInput) -> tuple[pd.DataFrame, dict]:
        """(summary table, notes for summary.json's "interval") over the finished shards."""
        raise NotImplementedError


ANALYSES: dict[str, Analysis] = {}


def register(analysis: Analysis) -> Analysis:
    """Add an analysis (the order of registration is the order of tables and summaries)."""
    if not analysis.name or not analysis.table:
        raise ValueError("an Analysis needs a name and a table")
    ANALYSES[analysis.name] = analysis
    return analysis


def selected(names) -> list[Analysis]:
    """The registered analyses among ``names``, in registration order."""
    return [a for n, a in ANALYSES.items() if n in names]


# ----------------------------------------------------------------------------- heads

class HeadScorer(Intervention):
    """metrics.head_scores from each layer's pattern as the forward pass makes it (so the L patterns of
    a long window are never held together)."""

    def __init__(self, ids, config):
        super().__init__()
        self.ids = ids                  # [B, T]
        self.config = config            # for each layer's sliding window (the normalised-entropy bound)
        self.per_layer: list[dict] = []  # per layer: stat -> [B, H]

    def pattern(self, pattern, layer):
        window = self.config.window(layer)
        per_b = [head_scores(pattern[b], self.ids[b], window=window) for b in range(pattern.shape[0])]
        self.per_layer.append({k: np.stack([d[k].double().cpu().numpy() for d in per_b]) for k in per_b[0]})


class Heads(Analysis):
    name, table = "heads", "heads"
    help = "per window, layer and head: every metrics.HEAD_STATS statistic"

    def columns(self):
        return LAYER_HEAD + [(s, pa.float64()) for s in HEAD_STATS]

    def hook(self, batch):
        return HeadScorer(batch.ids, batch.weights.config)

    def compute(self, batch, hook=None, intervention=None):
        c = batch.per_head_key()
        for s in HEAD_STATS:
            c[s] = np.stack([lay[s] for lay in hook.per_layer], 1).reshape(-1).tolist()   # [B, L, H]
        return c

    def summarise(self, s):
        L, H, stats = s.n_layers, s.n_heads, list(HEAD_STATS)
        acc = Boot(s.W, (L, H, len(stats)), (L, H, len(stats)))
        for k in s.shards:
            t = s.read(self.table, k).to_pandas()
            if not len(t):
                continue
            u, inv = np.unique(s.doc_index(t["doc"]), return_inverse=True)
            v = t[stats].to_numpy(np.float64)
            S = np.zeros((len(u), L, H, len(stats)))
            N = np.zeros_like(S)
            where = (inv, t["layer"].to_numpy(), t["head"].to_numpy())
            np.add.at(S, where, np.nan_to_num(v))
            np.add.at(N, where, ~np.isnan(v))
            acc.add(u, S, N)
        mean, lo, hi = acc.result(s.level)
        ll, hh, ss = np.meshgrid(np.arange(L), np.arange(H), np.arange(len(stats)), indexing="ij")
        return pd.DataFrame({
            "layer": ll.ravel(), "head": hh.ravel(), "label": [head_name(int(l), int(h)) for l, h in zip(ll.ravel(), hh.ravel())],
            "stat": np.array(stats)[ss.ravel()], "mean": mean.ravel(), "lo": lo.ravel(), "hi": hi.ravel(),
            "windows": acc.N.ravel().astype(np.int64),
        }), {}


# ----------------------------------------------------------------------------- entropy

class Entropy(Analysis):
    name, table = "entropy", "entropy"
    help = "per window, layer and head: the entropy and first-token curves over positions"
    carries_forward = True         # entropy_profile is a forward pass: the heads' scorer rides on it

    def columns(self):
        return LAYER_HEAD + [("entropy", pa.list_(pa.float32())), ("first_token", pa.list_(pa.float32()))]

    def compute(self, batch, hook=None, intervention=None):
        B, L, H, T = batch.shape
        curves = entropy_profile(batch.weights, batch.ids, intervention=intervention)
        ent = curves.entropy.float().cpu().numpy()          # [B, L, H, T]
        first = curves.first_token.float().cpu().numpy()
        return {**batch.per_head_key(),
                "entropy": list(ent.reshape(B * L * H, T)), "first_token": list(first.reshape(B * L * H, T))}

    def summarise(self, s):
        L, H = s.n_layers, s.n_heads
        P = sample_positions(int(s.windows["tokens"].max()), s.max_points, head=min(16, s.max_points))
        K = 2 * L * (H + 1) * len(P)
        We = None if s.W is None else s.W[: max(50, min(s.W.shape[0], ENTROPY_BOOT_CELLS // K))]
        acc = Boot(We, (2, L, H + 1, len(P)), (1, 1, 1, len(P)))
        for k in s.shards:
            t = s.read(self.table, k)
            if t.num_rows:
                acc.add(*self._sums(t, s.doc_index, L, H, P))
        mean, lo, hi = acc.result(s.level)
        qq, ll, hh, pp = np.meshgrid(np.arange(2), np.arange(L), np.arange(H + 1), np.arange(len(P)), indexing="ij")
        return pd.DataFrame({
            "quantity": np.array(["entropy", "first_token"])[qq.ravel()], "layer": ll.ravel(),
            "head": pd.array([None if h == H else int(h) for h in hh.ravel()], dtype="Int64"),
            "position": P[pp.ravel()], "n": P[pp.ravel()] + 1,
            "mean": mean.ravel(), "lo": lo.ravel(), "hi": hi.ravel(),
            "windows": np.broadcast_to(acc.N, mean.shape).ravel().astype(np.int64),
            "bound": np.where(qq.ravel() == 0, np.log(P[pp.ravel()] + 1.0), 1.0),
        }), {"resamples_entropy": 0 if We is None else We.shape[0]}

    @staticmethod
    def _sums(t, doc_index, L, H, P):
        """(documents, S, N) of one shard: per-document sums at the sampled positions P, per head and
        (index H) averaged over the layer's heads."""
        u, inv = np.unique(doc_index(t["doc"].to_numpy()), return_inverse=True)
        layer, head = t["layer"].to_numpy(), t["head"].to_numpy()
        S = np.zeros((len(u), 2, L, H + 1, len(P)))
        N = np.zeros((len(u), 1, 1, 1, len(P)))
        for q, col in enumerate(("entropy", "first_token")):
            arr = t[col].combine_chunks()
            vals = arr.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
            offs = arr.offsets.to_numpy()
            lens = np.diff(offs)
            for j, p in enumerate(P):
                m = lens > p
                if not m.any():
                    continue
                x = vals[offs[:-1][m] + p]
                np.add.at(S, (inv[m], q, layer[m], head[m], j), x)
                np.add.at(S, (inv[m], q, layer[m], H, j), x / H)
                if q == 0:
                    np.add.at(N, (inv[m], 0, 0, 0, j), (head[m] == 0) & (layer[m] == 0))
        return u, S, N


# ----------------------------------------------------------------------------- ablation losses

def ablation_loss(weights, ids: list[int], spec: str | None) -> tuple[float, int]:
    """(Σ next-token NLL in nats, predicted tokens) of one window, unmodified (``spec`` None) or under
    the ablation ``spec`` ("v=x", "zero-head:1.3", …; mean-head takes the means over this window).

    The one place the corpus runner touches :mod:`attnkit.ablations`: re-point it here when the
    ablations registry changes.
    """
    iv = None
    if spec is not None:
        cfg = weights.config
        sp = ablations.parse_spec(spec, n_layers=cfg.n_layers, n_heads=cfg.n_heads)
        kind = ablations.get_kind(sp.kind)
        ok, why = kind.available(cfg)
        if not ok:
            raise ablations.AblationError(why)
        iv = kind.intervention(sp, cfg, ablations.head_means(weights, [ids]) if kind.needs_means() else None)
    lo = ablations.loss(weights, [ids], iv)
    return float(sum(float(a.sum()) for a in lo.nll)), lo.tokens


def check_ablation(spec: str) -> str:
    """The spec in its canonical spelling (CorpusError when it cannot be parsed)."""
    try:
        return str(ablations.parse_spec(spec))
    except ablations.AblationError as e:
        raise CorpusError(f"--ablation {spec!r}: {e}") from None


class AblationLoss(Analysis):
    name, table = "ablation-loss", "ablation"
    help = "per window: next-token loss unmodified and under each --ablation, and the increase"
    sort = ("doc", "window")       # Arrow's sort is stable: a window's rows keep their order, baseline first
    defaults = {"ablations": []}

    def columns(self):
        return KEY + [("ablation", pa.string()), ("nll_sum", pa.float64()), ("tokens", pa.int32()),
                      ("nats", pa.float64()), ("increase", pa.float64())]

    def settings(self, raw):
        abl = [check_ablation(s) for s in raw.get("ablations") or ()]
        if "baseline" in abl or len(set(abl)) != len(abl):
            raise CorpusError("--ablation: each ablation once")
        return {"ablations": abl}

    def prepare(self, config, settings):
        for spec in settings.get("ablations") or ():      # against this model's layers and heads
            ablations.parse_spec(spec, n_layers=config.n_layers, n_heads=config.n_heads)

    def compute(self, batch, hook=None, intervention=None):
        c = {k: [] for k in ("doc", "window", "ablation", "nll_sum", "tokens", "nats", "increase")}
        for doc, n, window_ids in zip(batch.docs, batch.nums, batch.tokens):
            base, tokens = ablation_loss(batch.weights, window_ids, None)
            for spec in [None, *batch.settings.get("ablations", ())]:
                nll, _ = (base, tokens) if spec is None else ablation_loss(batch.weights, window_ids, spec)
                c["doc"].append(doc)
                c["window"].append(n)
                c["ablation"].append("baseline" if spec is None else spec)
                c["nll_sum"].append(nll)
                c["tokens"].append(tokens)
                c["nats"].append(nll / tokens)
                c["increase"].append((nll - base) / tokens)
        return c

    def summarise(self, s):
        specs = ["baseline", *s.settings["ablations"]]
        acc = Boot(s.W, (len(specs),), (1,))
        for k in s.shards:
            t = s.read(self.table, k).to_pandas()
            if not len(t):
                continue
            u, inv = np.unique(s.doc_index(t["doc"]), return_inverse=True)
            S = np.zeros((len(u), len(specs)))
            N = np.zeros((len(u), 1))
            a = t["ablation"].map({sp: i for i, sp in enumerate(specs)}).to_numpy()
            np.add.at(S, (inv, a), t["nll_sum"].to_numpy())
            base = a == 0
            np.add.at(N, (inv[base], 0), t["tokens"].to_numpy()[base])
            acc.add(u, S, N)
        mean, lo, hi = acc.result(s.level)
        inc = acc.S - acc.S[:1]
        binc = acc.bS - acc.bS[:, :1] if acc.bS.shape[0] else acc.bS
        imean, ilo, ihi = acc.result(s.level, inc, binc)
        return pd.DataFrame({
            "ablation": specs, "nats": mean, "lo": lo, "hi": hi,
            "increase": imean, "increase_lo": ilo, "increase_hi": ihi,
            "tokens": np.repeat(acc.N.astype(np.int64), len(specs)),
        }), {}


register(Heads())
register(Entropy())
register(AblationLoss())
