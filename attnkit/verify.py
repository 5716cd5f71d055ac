"""Proof that attnkit *is* GPT-2: run HuggingFace and attnkit on the same ids and compare.

Per layer: the block's output (residual stream) and the attention pattern of every
head; then the final LayerNorm output and the logits. Tolerances (float32):

* patterns:      max |Δ| ≤ 1e-5 (absolute; patterns lie in [0, 1])
* logits:        max |Δ| ≤ 1e-4 (absolute)
* hidden states: max |Δ| / max |h| ≤ 1e-5 (relative to the layer's largest entry:
  GPT-2's residual stream holds entries in the thousands)

And generation (:func:`compare_generation`): greedy decoding with attnkit's KV cache chooses
HF ``generate``'s tokens (``do_sample=False``), each step's logits within 1e-4, the cache holds
``n_kv_heads`` heads per layer and its keys/values equal HF's cache (same relative tolerance as
the hidden states) on the positions both hold (HF keeps only the last w − 1 under a sliding window).

``python -m attnkit verify --model NAME_OR_DIR --device cpu|cuda [--text ...] [--json OUT]``
exits 1 when any comparison is out of tolerance.
"""
from __future__ import annotations

import json
import math
import platform
import sys
from dataclasses import asdict, dataclass, field

import torch

from .families import family_for
from .model import generate, run

__all__ = ["TOL_PATTERN", "TOL_LOGITS", "TOL_HIDDEN_REL", "LayerDiff", "Report", "compare", "checks", "QUANTITIES",
           "cli", "DEFAULT_TEXT", "GenerationCheck", "compare_generation"]

TOL_PATTERN = 1e-5
TOL_LOGITS = 1e-4
TOL_HIDDEN_REL = 1e-5
DEFAULT_TEXT = (
    "The animal didn't cross the street because it was too tired. "
    "Attention lets every token look back at the tokens before it."
)


@dataclass
class LayerDiff:
    layer: int
    hidden_abs: float   # max |Δ| of the block output
    hidden_max: float   # max |h| of HF's block output
    hidden_rel: float   # hidden_abs / hidden_max
    pattern_abs: float  # max |Δ| over all heads' patterns

    @property
    def ok(self) -> bool:
        return self.hidden_rel <= TOL_HIDDEN_REL and self.pattern_abs <= TOL_PATTERN


@dataclass
class Report:
    model: str
    device: str
    n_tokens: int
    layers: list[LayerDiff]
    ln_final_rel: float
    logits_abs: float
    versions: dict = field(default_factory=dict)
    tolerances: dict = field(default_factory=lambda: {
        "pattern_abs": TOL_PATTERN, "logits_abs": TOL_LOGITS, "hidden_rel": TOL_HIDDEN_REL})
    generation: "GenerationCheck | None" = None   # set by the CLI's --generate (see compare_generation)

    @property
    def ok(self) -> bool:
        return (all(l.ok for l in self.layers) and self.logits_abs <= TOL_LOGITS
                and self.ln_final_rel <= TOL_HIDDEN_REL and (self.generation is None or self.generation.ok))

    @property
    def first_nonfinite(self) -> str | None:
        """Where NaN/Inf first appears ('layer 3', 'the final LayerNorm', 'the logits'), None if nowhere."""
        for l in self.layers:
            if not all(math.isfinite(v) for v in (l.hidden_abs, l.hidden_max, l.pattern_abs)):
                return f"layer {l.layer}"
        if not math.isfinite(self.ln_final_rel):
            return "the final LayerNorm"
        if not math.isfinite(self.logits_abs):
            return "the logits"
        return None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        d["first_nonfinite"] = self.first_nonfinite
        for row, l in zip(d["layers"], self.layers):
            row["ok"] = l.ok
        if self.generation is not None:
            d["generation"]["ok"] = self.generation.ok
        return d

    def table(self) -> str:
        lines = [f"model {self.model} on {self.device}, {self.n_tokens} tokens",
                 f"{'layer':>5}  {'hidden max|Δ|':>13}  {'max|h|':>9}  {'relative':>9}  {'pattern max|Δ|':>14}  ok"]
        for l in self.layers:
            lines.append(f"{l.layer:>5}  {l.hidden_abs:13.3e}  {l.hidden_max:9.3g}  {l.hidden_rel:9.2e}  "
                         f"{l.pattern_abs:14.3e}  {'yes' if l.ok else 'NO'}")
        lines.append(f"ln_final relative max|Δ| {self.ln_final_rel:.2e} (≤ {TOL_HIDDEN_REL:g})")
        lines.append(f"logits max|Δ| {self.logits_abs:.3e} (≤ {TOL_LOGITS:g})")
        lines.append(f"tolerances: patterns ≤ {TOL_PATTERN:g} abs, hidden ≤ {TOL_HIDDEN_REL:g} rel, "
                     f"logits ≤ {TOL_LOGITS:g} abs")
        where = self.first_nonfinite
        if where:
            lines.append(f"NaN/Inf first appears at {where} (in HuggingFace's or attnkit's output): the differences "
                         "from there on are undefined; the weights or the input overflow float32")
        if self.generation is not None:
            lines.append(self.generation.line())
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)


#: Report fields -> what they measure (the names pages and charts show).
QUANTITIES = {
    "hidden_rel": "hidden state (relative)",
    "pattern_abs": "attention pattern",
    "logits_abs": "logits",
    "ln_final_rel": "final norm (relative)",
}


def checks(report: dict, run_label: str = ""):
    """Every comparison of a report (``Report.to_dict()``) as one row — layer ('final' after the last),
    quantity, max |Δ|, tolerance, ok: the one place pass/fail is decided per comparison."""
    import pandas as pd

    tol = report["tolerances"]
    recs = []
    for row in report["layers"]:
        for q in ("hidden_rel", "pattern_abs"):
            recs.append({"layer": str(row["layer"]), "quantity": QUANTITIES[q], "max |Δ|": row[q], "tolerance": tol[q]})
    recs.append({"layer": "final", "quantity": QUANTITIES["ln_final_rel"], "max |Δ|": report["ln_final_rel"],
                 "tolerance": tol["hidden_rel"]})
    recs.append({"layer": "final", "quantity": QUANTITIES["logits_abs"], "max |Δ|": report["logits_abs"],
                 "tolerance": tol["logits_abs"]})
    df = pd.DataFrame(recs)
    df["ok"] = df["max |Δ|"] <= df["tolerance"]
    df["run"] = run_label
    return df


def versions(device) -> dict:
    import transformers

    v = {"torch": torch.__version__, "transformers": transformers.__version__,
         "python": platform.python_version(), "machine": platform.machine()}
    dev = torch.device(device)
    if dev.type == "cuda":
        v["gpu"] = torch.cuda.get_device_name(dev)
    return v


@torch.inference_mode()
def compare(hf_model, weights, ids, *, name: str = "") -> Report:
    """Run both implementations on ``ids`` (1-D or [1, T]) and measure the differences."""
    ids = torch.as_tensor(ids, dtype=torch.long, device=weights.device).reshape(1, -1)
    if hf_model.config._attn_implementation != "eager":
        hf_model.config._attn_implementation = "eager"
    blocks = family_for(hf_model.config.model_type).blocks(hf_model)
    outs: dict[int, torch.Tensor] = {}
    handles = [
        b.register_forward_hook(lambda mod, inp, out, l=l: outs.__setitem__(l, out[0] if isinstance(out, tuple) else out))
        for l, b in enumerate(blocks)
    ]
    try:
        ref = hf_model(ids, output_hidden_states=True, output_attentions=True, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    if not ref.attentions or ref.attentions[0] is None:
        raise RuntimeError("HF returned no attention weights: the model must use attn_implementation='eager'")
    ours = run(weights, ids, capture=("pattern", "resid_post", "ln_final"))
    rows = []
    for l in range(weights.config.n_layers):
        h_ref = outs[l].float()
        diff = (ours["resid_post", l] - h_ref).abs().max().item()
        hmax = h_ref.abs().max().item()
        rows.append(LayerDiff(
            layer=l, hidden_abs=diff, hidden_max=hmax, hidden_rel=diff / max(hmax, 1e-30),
            pattern_abs=(ours["pattern", l] - ref.attentions[l]).abs().max().item(),
        ))
    lnf_ref = ref.hidden_states[-1]
    lnf_rel = (ours["ln_final"] - lnf_ref).abs().max().item() / max(lnf_ref.abs().max().item(), 1e-30)
    return Report(
        model=name, device=str(weights.device), n_tokens=int(ids.shape[1]), layers=rows,
        ln_final_rel=lnf_rel, logits_abs=(ours.logits - ref.logits).abs().max().item(),
        versions=versions(weights.device),
    )


@dataclass
class GenerationCheck:
    """Greedy decoding with attnkit's KV cache against HF's ``generate``."""

    n_prompt: int
    tokens: list[int]          # attnkit's new tokens
    hf_tokens: list[int]       # HF generate's new tokens
    logits_abs: float          # max |Δ| of the next-token logits over all steps
    cache_heads: int           # key/value heads per layer in attnkit's cache
    n_kv_heads: int
    n_heads: int
    cache_rel: float           # max |Δ| / max |entry| between attnkit's and HF's cached keys and values
    cache_positions: int       # positions attnkit's cache holds per layer
    cache_bytes: int           # attnkit's cache
    full_head_bytes: int       # the same cache with one key/value head per query head

    @property
    def ok(self) -> bool:
        return (self.tokens == self.hf_tokens and self.logits_abs <= TOL_LOGITS
                and self.cache_heads == self.n_kv_heads and self.cache_rel <= TOL_HIDDEN_REL)

    def line(self) -> str:
        same = "equal to" if self.tokens == self.hf_tokens else "DIFFERENT from"
        return (f"greedy generation with the KV cache: {len(self.tokens)} tokens {same} HF generate's, step logits "
                f"max|Δ| {self.logits_abs:.3e}; cache holds {self.cache_heads} key/value heads "
                f"(model: {self.n_kv_heads} kv / {self.n_heads} query heads), {self.cache_bytes:,} bytes "
                f"({self.cache_bytes / self.full_head_bytes:.2f}× a full-head cache), cache relative max|Δ| "
                f"vs HF {self.cache_rel:.2e}")


def _hf_cache_layers(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer of an HF cache (transformers 5 ``layers``, or 4.x tuples/lists)."""
    if cache is None:
        return []
    if hasattr(cache, "layers"):
        return [(l.keys, l.values) for l in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]


@torch.inference_mode()
def compare_generation(hf_model, weights, ids, n_new: int = 8) -> GenerationCheck:
    """Greedy-decode ``n_new`` tokens after ``ids`` with attnkit's KV cache and with HF's
    ``generate(do_sample=False)`` (no end-of-text stop, no repetition penalty), and compare."""
    cfg = weights.config
    ids = torch.as_tensor(ids, dtype=torch.long, device=weights.device).reshape(1, -1)
    ours = generate(weights, ids, n_new, use_cache=True)
    ref = hf_model.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new, min_new_tokens=0, do_sample=False,
        num_beams=1, eos_token_id=None, pad_token_id=0, repetition_penalty=1.0, no_repeat_ngram_size=0,
        bad_words_ids=None, suppress_tokens=None, begin_suppress_tokens=None, forced_bos_token_id=None,
        forced_eos_token_id=None, use_cache=True, return_dict_in_generate=True, output_logits=True)
    hf_tokens = ref.sequences[0, ids.shape[1]:].tolist()
    steps = min(len(ref.logits), len(ours.step_logits))
    logits_abs = max(((ref.logits[i][0].float() - ours.step_logits[i].float()).abs().max().item()
                      for i in range(steps)), default=float("inf"))
    cache = ours.cache
    rel = 0.0
    for (k_hf, v_hf), k, v in zip(_hf_cache_layers(getattr(ref, "cache", None) or getattr(ref, "past_key_values", None)),
                                  cache.keys, cache.values):
        for a, b in ((k_hf, k), (v_hf, v)):
            n = min(a.shape[-2], b.shape[-2])
            if a.shape[:2] != b.shape[:2]:
                rel = float("inf")
                continue
            a, b = a[..., a.shape[-2] - n:, :].float(), b[..., b.shape[-2] - n:, :].float()
            rel = max(rel, (a - b).abs().max().item() / max(a.abs().max().item(), 1e-30))
    return GenerationCheck(
        n_prompt=int(ids.shape[1]), tokens=ours.tokens, hf_tokens=hf_tokens, logits_abs=logits_abs,
        cache_heads=int(cache.keys[0].shape[1]), n_kv_heads=cfg.kv_heads, n_heads=cfg.n_heads,
        cache_rel=rel, cache_positions=cache.length, cache_bytes=cache.nbytes(),
        full_head_bytes=cache.nbytes() * cfg.n_heads // cfg.kv_heads,
    )


def cli(argv=None) -> int:
    from .cli import args as T
    from .loading import load_for_cli

    p = T.Parser(prog="python -m attnkit verify", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, type=T.utf8_text, help="hub name (gpt2, distilgpt2, …), attnkit-tiny or a local folder "
                                                 "(default: gpt2 if reachable, else the shipped model)")
    p.add_argument("--device", default="cpu", type=T.device, help="cpu, cuda, mps or auto (default: cpu)")
    p.add_argument("--text", default=DEFAULT_TEXT, type=T.utf8_text, help="text to run on")
    p.add_argument("--tokens", type=T.positive_int, default=None,
                   help="instead of --text, this many random token ids (e.g. the full context, 1024)")
    p.add_argument("--seed", type=T.nonneg_int, default=0)
    p.add_argument("--generate", type=T.nonneg_int, default=8, metavar="N",
                   help="also greedy-decode N tokens with the KV cache and compare with HF generate (0: skip)")
    p.add_argument("--json", dest="json_out", default=None, type=T.writable_path, help="write the report as JSON here")
    a = p.parse_args(argv)
    m = load_for_cli(a.model, a.device, "attnkit verify")
    if m is None:
        return 2
    if a.tokens:
        n = min(a.tokens, m.config.n_ctx)
        ids = torch.randint(0, m.config.d_vocab, (n,), generator=torch.Generator().manual_seed(a.seed))
    else:
        ids = torch.tensor(m.encode(a.text)[: m.config.n_ctx])
        if ids.numel() == 0:
            print("attnkit verify: the text has no tokens", file=sys.stderr)
            return 2
    rep = compare(m.hf_model, m.weights, ids.to(m.device), name=m.name)
    n_new = min(a.generate, m.config.n_ctx - int(ids.numel()))
    if n_new > 0:
        rep.generation = compare_generation(m.hf_model, m.weights, ids.to(m.device), n_new)
    print(rep.table())
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump(rep.to_dict(), f, indent=2)
    return 0 if rep.ok else 1
