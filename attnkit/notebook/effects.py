"""Results that measure effects and explanations: ablation verdicts (Ablations), activation patching and direct
logit attribution (Head effects), composition and circuits (Circuits), the why split (Heatmaps' "why this
key"), and the check against HuggingFace (Verify).

Each wraps the library's result object (kept as a field, for everything the summary leaves out) and draws with
the page's chart builder (:mod:`attnkit.charts`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import ablations
from .. import calibration
from .. import score_terms as terms_lib
from .. import verify as verify_lib
from ..attribution import DLA
from ..charts import ablations as ablation_charts
from ..charts import circuits as circuit_charts
from ..charts import effects as effect_charts
from ..charts import score_terms as terms_charts
from ..charts import verify as verify_charts
from ..circuits.compose import Composition as CompositionScores
from ..circuits.discover import NO_SHARE, Circuit as FoundCircuit
from ..i18n import msg, status_label, t
from ..patching import PatchResult
from ..pieces import token_labels
from ..standard import head_name
from .results import Result

__all__ = ["Ablation", "Patching", "Attribution", "Composition", "Circuit", "Why", "Verify"]


def _signed(rows) -> str:
    return ", ".join(f"{name} {value:+.3f}" for name, value in rows)


@dataclass(repr=False)
class Ablation(Result):
    """One design choice switched off (V = X, W_K = W_Q, no 1/√d, no mask, a head zeroed or mean-ablated) against
    the unmodified model: the next-token loss change with its 95 % interval, the kind's mechanism checks and a
    verdict on the seed's claim. The table is the checks; the chart the per-layer numbers (or, without a mask,
    how much each position's logits move)."""

    result: ablations.Result
    tokens: list[str] | None = None        # the text's tokens, when there was one text

    @property
    def verdict(self) -> str:
        """'supported', 'not supported' or 'not enough evidence'."""
        return self.result.verdict.status

    @property
    def delta(self) -> float | None:
        """The loss change, ablated − baseline (nats per token); None when nothing was predicted."""
        return None if self.result.effect is None else self.result.effect.delta

    def _frame(self) -> pd.DataFrame:
        return ablation_charts.evidence_frame(self.result)

    def _chart(self, metric: str | None = None):
        res = self.result
        if res.per_position and metric is None:
            labels = token_labels(self.tokens) if self.tokens is not None else None
            return ablation_charts.position_chart(ablation_charts.position_frame(res, labels))
        charted = [m for m in ablations.get_kind(res.kind).metrics if m.chart and (metric in (None, m.key))]
        if not charted:
            raise ValueError(f"{res.kind} has no per-layer chart{f' for {metric!r}' if metric else ''}; "
                             "see .to_pandas() and .summary()")
        return ablation_charts.layer_metric_chart(ablation_charts.layer_metric_frame(res, charted[0]), charted[0])

    def _summary(self):
        res = self.result
        return msg("{label} on {texts} text(s), {tokens} tokens: next-token loss {base} → {ablated} nats/token. "
                   "Verdict: {status}. {measured}", label=res.label, texts=res.texts, tokens=res.tokens,
                   base=f"{res.baseline.nats:.4f}", ablated=f"{res.ablated.nats:.4f}",
                   status=status_label(res.verdict.status), measured=res.verdict.text)


@dataclass(repr=False)
class Patching(Result):
    """Activation patching on a clean/corrupted pair: each activation of ``target`` (each head's z, or the residual
    stream / attention / MLP output of each layer and position) taken from the other run, one at a time, and the
    logit difference answer − distractor read. ``normalised``: 0 = the receiving run's value, 1 = the source's."""

    result: PatchResult
    tokens: list[str]                      # the clean prompt's tokens

    def top(self, n: int = 5) -> pd.DataFrame:
        """The ``n`` patched activations with the largest |normalised| effect."""
        df = self._frame()
        return df.reindex(df["normalised"].abs().sort_values(ascending=False).index).head(n).reset_index(drop=True)

    def _frame(self) -> pd.DataFrame:
        df = self.result.frame(self.tokens)
        if self.result.target == "z":
            df.insert(0, "name", [head_name(int(l), int(h)) for l, h in zip(df["layer"], df["head"])])
        return df

    def _chart(self):
        res, df = self.result, self._frame()
        how = t("Denoising") if res.direction == "denoise" else t("Noising")
        if res.per_position:
            return effect_charts.layer_pos_map(df, token_labels(self.tokens), "normalised", legend_title=t("normalised"),
                                               title=t("{how}: normalised logit difference", how=how))
        if res.target == "z":
            return effect_charts.head_map(df, "normalised", legend_title=t("normalised"),
                                          title=t("{how}: normalised logit difference", how=how))
        return effect_charts.layer_bars(df.assign(mean=df["normalised"], std=0.0, n=1),
                                        title=t("{how}: normalised logit difference", how=how))

    def _summary(self):
        res, top = self.result, self.top(3)
        label = list(top["name"] if "name" in top else top["row"] if "row" in top else "L" + top["layer"].astype(str))
        if "position" in top:
            label = [f"{name} @ {pos} {self.tokens[pos]!r}" for name, pos in zip(label, top["position"])]
        return msg("Activation patching ({direction}, {target}) on a {T}-token pair: logit difference clean {clean}, "
                   "corrupted {corrupt}; largest normalised effects: {top}.", direction=res.direction,
                   target=res.target, T=len(self.tokens), clean=f"{res.clean_ld:+.3f}",
                   corrupt=f"{res.corrupt_ld:+.3f}", top=_signed(zip(label, top["normalised"])))


@dataclass(repr=False)
class Attribution(Result):
    """Direct logit attribution: logit(answer) − logit(distractor) at one position split exactly into the residual
    stream's parts (embeddings, each head, each MLP, biases), through the final norm held at its σ."""

    dla: DLA

    def heads(self) -> pd.DataFrame:
        """Each head's direct contribution (columns layer, head, logit_diff)."""
        return self.dla.head_frame()

    def _frame(self) -> pd.DataFrame:
        return self.dla.frame()

    def _chart(self, top: int = 20, heads: bool = False):
        if heads:
            return effect_charts.head_map(self.heads(), "logit_diff", legend_title=t("logit difference"),
                                          title=t("Direct effect of each head on the logit difference"))
        df = self._frame()
        return effect_charts.attribution_bars(df, top, title=t("Top {top} of {n} parts", top=min(top, len(df)),
                                                               n=len(df)))

    def _summary(self):
        df = self._frame()
        top = df.reindex(df["logit_diff"].abs().sort_values(ascending=False).index).head(3)
        return msg("Direct logit attribution at position {pos}: logit(answer) − logit(distractor) = {actual}; the parts "
                   "add up to {total}; largest: {top}.", pos=self.dla.pos, actual=f"{self.dla.actual:+.4f}",
                   total=f"{self.dla.total:+.4f}", top=_signed(zip(top["part"], top["logit_diff"])))


@dataclass(repr=False)
class Composition(Result):
    """Composition scores between heads of different layers, from the weights alone (no prompt): how much a later
    head's query (q), key (k) or value (v) *could* read what an earlier head writes, beside a random baseline. They
    measure the weights, not an effect: a decoy edge can tie a real one (path patching measures effects)."""

    scores: CompositionScores

    def _frame(self) -> pd.DataFrame:
        return self.scores.frame()

    def _chart(self, mode: str = "k"):
        return circuit_charts.composition_matrix(self.scores, mode)

    def _summary(self):
        best = {m: self.scores.top(m, 1) for m in self.scores.scores}
        text = ", ".join(f"{m.upper()} {b[0][0]} → {b[0][1]} {b[0][2]:.3f}" for m, b in best.items() if b)
        return msg("Composition scores (from the weights, no prompt); random baseline {mean} (99th percentile "
                   "{q99}); strongest: {best}. What the weights allow, not an effect: a real edge and a decoy's can "
                   "score alike; path patching (Model.circuit, the Circuits page) measures what an edge does.",
                   mean=f"{self.scores.baseline['mean']:.3f}", q99=f"{self.scores.baseline['q99']:.3f}", best=text)


@dataclass(repr=False)
class Circuit(Result):
    """A circuit found automatically (edge attribution, integrated gradients) and checked by ablation: the smallest
    top-k set of edges whose faithfulness LD(circuit) / LD(clean) reaches the target. On a planted model the
    stated circuit (CIRCUIT.json) is drawn beside it: found, missed and extra edges."""

    found: FoundCircuit
    n_layers: int
    n_heads: int
    stated: dict | None = None             # the model's CIRCUIT.json, when it has one
    group: int = 1                         # query heads per key/value head

    @property
    def edges(self) -> list[tuple[str, str, float]]:
        return list(self.found.edges)

    @property
    def heads(self) -> list[str]:
        return self.found.heads

    @property
    def faithfulness(self) -> float:
        """LD(circuit) / LD(clean) (NaN when the pair is not solved)."""
        return self.found.share

    def compare(self, stated=None) -> dict:
        """found / missed / extra edges against a stated circuit (a :class:`attnkit.planted_files.StatedCircuit`, as
        ``Model.stated_circuit()`` returns, or a list of (sender, receiver) edges; default this model's own), with
        precision and recall."""
        stated = self.stated if stated is None else stated
        if stated is None:
            raise ValueError("this model states no circuit (no CIRCUIT.json): give one to compare with")
        return calibration.compare_circuits(stated, self.found.edges, self.group)

    def _frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.found.edges, columns=["sender", "receiver", "attribution"])
        if self.stated is not None:
            marks = calibration.edge_marks(self.stated, self.found.edges, self.group)
            df["stated circuit"] = [marks.get((s, r), "") for s, r in zip(df["sender"], df["receiver"])]
        return df

    def _chart(self, kind: str = "graph"):
        if kind == "faithfulness":
            if not self.found.solved:
                raise ValueError(f"{NO_SHARE}: the faithfulness curve is a share of the clean logit difference; see "
                                 ".summary() and .found.notes")
            return circuit_charts.faithfulness_curve(self.found)
        if kind != "graph":
            raise ValueError(f"kind is 'graph' or 'faithfulness', not {kind!r}")
        title = t("The circuit: {n} edges", n=self.found.size)
        if self.stated is None:
            return circuit_charts.circuit_graph(self.found.edges, self.n_layers, self.n_heads, title=title)
        edges, marks = calibration.marked_edges(self.stated, self.found, self.group)
        return circuit_charts.circuit_graph(edges, self.n_layers, self.n_heads, title=title, marks=marks,
                                            mark_labels=circuit_charts.mark_labels(), mark_title=t("stated circuit"))

    def _summary(self):
        if not self.found.solved:
            return msg("{no_share}: the model does not solve the prompt pair(s), so no circuit is claimed; the {all} "
                       "edges are only ranked (.found.ranked; .found.notes say why).", no_share=NO_SHARE,
                       all=len(self.found.ranked))
        return msg("A circuit of {n} of {all} edges recovers {share} of the clean logit difference (target {target}); "
                   "heads: {heads}.", n=self.found.size, all=len(self.found.ranked), share=self.found.share_text(),
                   target=f"{self.found.target:.0%}", heads=" ".join(self.found.heads) or t("none"))


@dataclass(repr=False)
class Why(Result):
    """Why does query i attend to key j? One head's score split exactly into query-part × key-part terms (the
    residual stream's parts on each side, through the norm held at its σ); their sum is the model's score.
    Without a key: the whole row, each visible key's score split by one side."""

    terms: terms_lib.ScoreTerms | terms_lib.RowTerms
    tokens: list[str]

    def explain(self) -> str:
        """One sentence from the numbers: the key part that matters most and the query part reading it."""
        if isinstance(self.terms, terms_lib.RowTerms):
            raise ValueError("explain() needs a key: give key= to Model.why")
        return self.summary()

    def top(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` largest terms with each one's share of the score."""
        return terms_lib.top_terms(self.terms, n)

    def grouped(self, by: str = "kind") -> pd.DataFrame:
        """The terms summed by kind (embeddings / heads / MLPs / biases) or by layer, on each side."""
        return terms_lib.grouped(self.terms, by)

    def _frame(self) -> pd.DataFrame:
        if isinstance(self.terms, terms_lib.RowTerms):
            return self.terms.frame("key")
        return self.terms.frame()

    def _chart(self, max_parts: int = 30, side: str = "key"):
        if isinstance(self.terms, terms_lib.RowTerms):
            return terms_charts.row_by_kind(self.terms, token_labels(self.tokens), side)
        return terms_charts.terms_grid(self.terms, max_parts)

    def _summary(self):
        if isinstance(self.terms, terms_lib.ScoreTerms):
            return terms_lib.explain(self.terms, self.tokens)
        row = self.terms
        n = int(np.argmax(row.scores))
        j = int(row.keys[n])
        return msg("{head}, query {query} {qtok!r}: the highest score, {score}, goes to key {key} {ktok!r} ({n} keys "
                   "visible).", head=row.head, query=row.query, qtok=self.tokens[row.query], score=f"{row.scores[n]:+.3f}",
                   key=j, ktok=self.tokens[j], n=len(row.keys))


@dataclass(repr=False)
class Verify(Result):
    """attnkit against HuggingFace, layer by layer: attnkit's float32 error and HuggingFace's own, each against
    HuggingFace run in float64, and attnkit in float64 against it (which catches a wrong formula)."""

    report: verify_lib.Report

    @property
    def ok(self) -> bool:
        return self.report.ok

    def _frame(self) -> pd.DataFrame:
        return verify_lib.checks(self.report.to_dict(), self.report.device)

    def _chart(self):
        return verify_charts.verify_chart(self._frame(), title=t("error against HuggingFace in float64 ({device})",
                                                                 device=self.report.device))

    def _summary(self):
        return msg("{model} on {n} tokens ({device}): {verdict}", model=self.report.model, n=self.report.n_tokens,
                   device=self.report.device, verdict=self.report.verdict_text())
