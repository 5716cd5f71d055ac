"""Proof that attnkit *is* the HuggingFace model: both against the exact answer, layer by layer.

The reference is HuggingFace run in **float64** on the CPU. For each checked quantity — every
layer's attention patterns and block output (residual stream), the final norm, the logits, and
generation's step logits — attnkit's float32 error and HuggingFace's own float32 error are measured
against it, and the verdict is :func:`attnkit.tolerances.verdict`: attnkit's error within
``FACTOR ×`` HF's plus ``FLOOR``, i.e. attnkit is as close to the exact answer as HuggingFace itself
is. attnkit run in float64 on the same weights must also equal the reference within ``TOL_F64``: that
check has no float32 rounding in it, so it is the one that catches a wrong formula.

Errors are unit-free: patterns absolute (they lie in [0, 1]); hidden states, final norm and logits
relative to the reference's largest entry. When the float64 reference would not fit in the memory
available, it runs on the first tokens only (the model is causal, so they are a complete input) and
the report says so. The direct float32 difference attnkit − HF is kept in every row too.

``python -m attnkit verify`` (:mod:`attnkit.cli.verify`) prints the table and exits 1 on a failure.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import platform
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch
import transformers

from . import tolerances as TOL
from .progress import Progress, Steps
from .families import family_for
from .model import generate, run
from .tolerances import TOL_CACHE_REL, TOL_HIDDEN_REL, TOL_LOGITS, TOL_PATTERN
from .weights import Weights, extract

__all__ = ["TOL_PATTERN", "TOL_LOGITS", "TOL_HIDDEN_REL", "Check", "LayerDiff", "Report", "compare", "checks",
           "QUANTITIES", "DEFAULT_TEXT", "GenerationCheck", "compare_generation", "reference_tokens", "reference_bytes",
           "as_dtype", "float64_pair"]

DEFAULT_TEXT = (
    "The animal didn't cross the street because it was too tired. "
    "Attention lets every token look back at the tokens before it."
)

#: Check quantities -> what they measure (the names pages and charts show).
QUANTITIES = {
    "pattern": "attention pattern",
    "hidden": "hidden state (relative)",
    "ln_final": "final norm (relative)",
    "logits": "logits (relative)",
    "step_logits": "generation step logits (relative)",
}


@dataclass
class Check:
    """One quantity at one place: errors of attnkit float32 and HF float32 against HF float64."""

    quantity: str          # a key of QUANTITIES
    ours: float            # attnkit float32 vs the float64 reference
    hf: float              # HF float32 vs the float64 reference
    f64: float             # attnkit float64 vs the float64 reference
    direct: float          # attnkit float32 vs HF float32 (same units)
    f64_tol: float = TOL.TOL_F64   # the family's float64 bound (tolerances.f64_tolerance)

    @property
    def allowed(self) -> float:
        return TOL.allowed(self.hf)

    @property
    def ok(self) -> bool:
        return TOL.verdict(self.ours, self.hf) and self.f64_ok

    @property
    def f64_ok(self) -> bool:
        return math.isfinite(self.f64) and self.f64 <= self.f64_tol

    def row(self) -> dict:
        return {**asdict(self), "allowed": self.allowed, "ok": self.ok}


@dataclass
class LayerDiff:
    layer: int
    pattern: Check
    hidden: Check
    hidden_abs: float   # max |Δ| of the block output, attnkit float32 vs HF float32
    hidden_max: float   # max |h| of HF's float32 block output

    @property
    def hidden_rel(self) -> float:
        return self.hidden.direct

    @property
    def pattern_abs(self) -> float:
        return self.pattern.direct

    @property
    def ok(self) -> bool:
        return self.pattern.ok and self.hidden.ok


@dataclass
class Report:
    model: str
    device: str
    n_tokens: int
    layers: list[LayerDiff]
    ln_final: Check
    logits: Check
    logits_abs: float = 0.0                          # attnkit float32 vs HF float32 logits, max |Δ| absolute
    reference: dict = field(default_factory=dict)   # dtype, device, tokens, and why fewer if so
    versions: dict = field(default_factory=dict)
    rule: dict = field(default_factory=lambda: {"factor": TOL.FACTOR, "floor": TOL.FLOOR, "text": TOL.RULE})
    generation: "GenerationCheck | None" = None   # set by the CLI's --generate (see compare_generation)

    @property
    def ln_final_rel(self) -> float:
        return self.ln_final.direct

    def all_checks(self) -> list[tuple[str, Check]]:
        out = [(str(l.layer), c) for l in self.layers for c in (l.pattern, l.hidden)]
        out += [("final", self.ln_final), ("final", self.logits)]
        if self.generation is not None and self.generation.step_logits is not None:
            out.append(("generation", self.generation.step_logits))
        return out

    @property
    def ok(self) -> bool:
        return all(c.ok for _, c in self.all_checks()) and (self.generation is None or self.generation.ok)

    @property
    def first_nonfinite(self) -> str | None:
        """Where NaN/Inf first appears ('layer 3', 'the final norm', 'the logits'), None if nowhere."""
        def bad(*cs):
            return not all(math.isfinite(v) for c in cs for v in (c.ours, c.hf, c.f64, c.direct))
        for l in self.layers:
            if bad(l.pattern, l.hidden) or not math.isfinite(l.hidden_abs):
                return f"layer {l.layer}"
        if bad(self.ln_final):
            return "the final norm"
        if bad(self.logits):
            return "the logits"
        return None

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("layers", "ln_final", "logits", "generation")}
        d["layers"] = [{"layer": l.layer, "hidden_abs": l.hidden_abs, "hidden_max": l.hidden_max,
                        "hidden_rel": l.hidden_rel, "pattern_abs": l.pattern_abs, "ok": l.ok,
                        "pattern": l.pattern.row(), "hidden": l.hidden.row()} for l in self.layers]
        d["ln_final"], d["logits"] = self.ln_final.row(), self.logits.row()
        d["ln_final_rel"] = self.ln_final_rel
        d["checks"] = [{"layer": where, **c.row()} for where, c in self.all_checks()]
        d["ok"], d["first_nonfinite"] = self.ok, self.first_nonfinite
        if self.generation is not None:
            d["generation"] = self.generation.to_dict()
        return d

    def table(self) -> str:
        ref = self.reference
        lines = [f"model {self.model} on {self.device}, {self.n_tokens} tokens; reference: HuggingFace in "
                 f"{ref.get('dtype', 'float64')} on {ref.get('device', 'cpu')}, {ref.get('n_tokens', self.n_tokens)} "
                 "tokens"]
        if ref.get("note"):
            lines.append(ref["note"])
        lines.append(f"{'layer':>10}  {'quantity':<34} {'attnkit f32':>11} {'HF f32':>10} {'allowed':>10} "
                     f"{'f64 vs f64':>10}  ok")
        for where, c in self.all_checks():
            lines.append(f"{where:>10}  {QUANTITIES[c.quantity]:<34} {c.ours:11.2e} {c.hf:10.2e} {c.allowed:10.2e} "
                         f"{c.f64:10.1e}  {'yes' if c.ok else 'NO'}")
        lines.append(f"errors against HuggingFace float64; rule: {TOL.RULE}")
        if self.layers and self.layers[0].pattern.f64_tol != TOL.TOL_F64:
            lines.append(f"this family's HF code computes some steps in float32 even in float64: float64 bound "
                         f"{self.layers[0].pattern.f64_tol:g}")
        where = self.first_nonfinite
        if where:
            lines.append(f"NaN/Inf first appears at {where} (in HuggingFace's or attnkit's output): the differences "
                         "from there on are undefined; the weights or the input overflow float32")
        if self.generation is not None:
            lines.append(self.generation.line())
        lines.append(self.verdict_text())
        return "\n".join(lines)

    def verdict_text(self) -> str:
        if self.ok:
            return ("PASS — attnkit is as close to the exact answer as HuggingFace itself is, and equals it in "
                    "float64")
        bad = [c for _, c in self.all_checks() if not c.ok]
        if any(not c.f64_ok for c in bad):
            return "FAIL — attnkit in float64 differs from HuggingFace in float64: a formula differs"
        if bad:
            return "FAIL — attnkit's float32 error is larger than HuggingFace's own allows"
        return "FAIL — " + (self.generation.failure() if self.generation is not None else "")


def checks(report: dict, run_label: str = ""):
    """Every check of a report (``Report.to_dict()``) as one row — layer ('final' after the last,
    'generation'), quantity, attnkit's error, HF's error, allowed, float64 |Δ|, ok."""
    recs = [{"layer": c["layer"], "quantity": QUANTITIES[c["quantity"]], "attnkit error": c["ours"],
             "HF error": c["hf"], "allowed": c["allowed"], "float64 |Δ|": c["f64"], "ok": bool(c["ok"])}
            for c in report["checks"]]
    df = pd.DataFrame(recs)
    df["run"] = run_label
    return df


def versions(device) -> dict:
    v = {"torch": torch.__version__, "transformers": transformers.__version__,
         "python": platform.python_version(), "machine": platform.machine()}
    dev = torch.device(device)
    if dev.type == "cuda":
        v["gpu"] = torch.cuda.get_device_name(dev)
    return v


# ----------------------------------------------------------------------------- the float64 reference

def as_dtype(weights: Weights, dtype=torch.float64, device="cpu") -> Weights:
    """A copy of ``weights`` with every tensor in ``dtype`` on ``device`` (config unchanged)."""
    def cast(x):
        return x.detach().to(device=device, dtype=dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() \
            else x

    layers = [type(lw)(**{f.name: cast(getattr(lw, f.name)) for f in dataclasses.fields(lw)}) for lw in weights.layers]
    top = {f.name: cast(getattr(weights, f.name)) for f in dataclasses.fields(weights) if f.name != "layers"}
    return type(weights)(**top, layers=layers)


def _hf_float64(hf_model, copy_tensors: bool | None = None):
    """A float64 copy of the HF model on the CPU (eager attention); the original is left as it is. A model
    on another device is rebuilt on the CPU from its state dict (``copy_tensors``; the default for a
    model not on the CPU), so that no second copy is made in accelerator memory."""
    if copy_tensors is None:
        copy_tensors = next(hf_model.parameters()).device.type != "cpu"
    if not copy_tensors:
        ref = copy.deepcopy(hf_model)
    else:
        ref = type(hf_model)(hf_model.config)
        ref.load_state_dict({k: v.detach().cpu() for k, v in hf_model.state_dict().items()})
    ref = ref.to(device="cpu", dtype=torch.float64).eval()
    ref.config = copy.deepcopy(ref.config)
    ref.config._attn_implementation = "eager"
    ref.attnkit_note = _float64_options_off(ref)
    return ref


#: config options HF cannot run in float64 (it raises), and what turning them off changes: only the order
#: and precision of float32 steps, which float64 makes moot. The float64 reference runs with them off.
FLOAT64_OFF = {
    "reorder_and_upcast_attn": "computes the attention scores in float32 in another order (HF refuses it in "
                               "float64)",
}


def _float64_options_off(ref) -> str:
    """Turn FLOAT64_OFF's options off in the float64 copy ``ref`` (config and modules); what was done, or ''."""
    off = [k for k in FLOAT64_OFF if getattr(ref.config, k, False)]
    for k in off:
        setattr(ref.config, k, False)
        for mod in ref.modules():
            if getattr(mod, k, False) is True:
                setattr(mod, k, False)
    return "; ".join(f"the float64 reference runs with {k} off (it {FLOAT64_OFF[k]}; in float64 the order "
                     "is moot)" for k in off)


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def reference_bytes(cfg, n_params: int, T: int) -> int:
    """Bytes the float64 reference needs at T tokens: two float64 copies of the weights (HF's and
    attnkit's), both runs' patterns of every layer kept for the comparison, a layer's scores in flight,
    logits and hidden states."""
    L, H, V, d = cfg.n_layers, cfg.n_heads, cfg.d_vocab, cfg.d_model
    return 8 * (2 * n_params + (2 * L + 4) * H * T * T + 6 * T * V + 8 * (L + 2) * T * d)


def reference_tokens(cfg, n_params: int, T: int, available: int | None = None) -> tuple[int, str]:
    """How many of T tokens the float64 reference runs on: all of them when that needs at most half
    the memory available, else the most that do (and a note saying so)."""
    available = _available_bytes() if available is None else available
    if available is None or reference_bytes(cfg, n_params, T) <= available // 2:
        return T, ""
    n = T
    while n > 1 and reference_bytes(cfg, n_params, n) > available // 2:
        n = max(1, int(n * 0.8))
    return n, (f"the float64 reference runs on the first {n} of {T} tokens: all {T} would need "
               f"{reference_bytes(cfg, n_params, T) / 2**30:.1f} GiB, {available / 2**30:.1f} GiB are available")


def _tensors(weights: Weights) -> list[torch.Tensor]:
    objs = [weights, *weights.layers]
    return [x for o in objs for f in dataclasses.fields(o) if isinstance(x := getattr(o, f.name), torch.Tensor)]


def float64_pair(hf_model, weights: Weights):
    """(HF in float64 on the CPU, attnkit's ``weights`` in float64 on the CPU). When every tensor of
    ``weights`` is a view of ``hf_model``'s parameters (as loading makes them), attnkit's float64 weights
    are extracted from the float64 HF copy (views, no second copy); otherwise (edited or patched weights)
    ``weights`` itself is converted."""
    hf64 = _hf_float64(hf_model)
    storages = {p.untyped_storage().data_ptr() for p in [*hf_model.parameters(), *hf_model.buffers()]}
    if all(t.untyped_storage().data_ptr() in storages for t in _tensors(weights) if t.is_floating_point()):
        w64 = extract(hf64)
        if w64.config == weights.config:
            return hf64, w64
    return hf64, as_dtype(weights)


def _hf_outputs(hf_model, ids) -> dict:
    """HF's block outputs, patterns, final-norm output and logits on ``ids`` [1, T] (eager attention)."""
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
    return {"hidden": [outs[l] for l in range(len(blocks))], "pattern": list(ref.attentions),
            "ln_final": ref.hidden_states[-1], "logits": ref.logits}


def _ours_outputs(weights: Weights, ids, intervention=None) -> dict:
    tr = run(weights, ids, capture=("pattern", "resid_post", "ln_final"), intervention=intervention)
    L = weights.config.n_layers
    return {"hidden": [tr["resid_post", l] for l in range(L)], "pattern": [tr["pattern", l] for l in range(L)],
            "ln_final": tr["ln_final"], "logits": tr.logits}


def _cut(x: torch.Tensor, kind: str, n: int) -> torch.Tensor:
    """The first n positions of an output (queries and keys for patterns), as float64 on the CPU."""
    x = x[..., :n, :n] if kind == "pattern" else x[:, :n]
    return x.detach().to(device="cpu", dtype=torch.float64)


def _err(x: torch.Tensor, ref: torch.Tensor, kind: str) -> float:
    """max |x − ref|, absolute for patterns, else relative to max |ref|."""
    d = (x - ref).abs().max().item()
    return d if kind == "pattern" else d / max(ref.abs().max().item(), 1e-300)


def _check(kind: str, ours, hf, ours64, ref, n: int, family: str) -> Check:
    a, b = _cut(ours, kind, n), _cut(hf, kind, n)
    return Check(quantity=kind, ours=_err(a, ref, kind), hf=_err(b, ref, kind), f64=_err(ours64, ref, kind),
                 direct=_err(a, b, kind), f64_tol=TOL.f64_tolerance(family))


@torch.inference_mode()
def compare(hf_model, weights, ids, *, name: str = "", intervention=None, available: int | None = None,
            pair=None, max_reference_tokens: int | None = None,
            progress: Progress | None = None) -> Report:
    """Run HF and attnkit in float32 on ``ids`` (1-D or [1, T]), and both in float64 on the CPU, and
    measure each float32 run's error against HF float64 (see the module docstring).

    intervention: attnkit hooks applied to both attnkit runs (e.g. a deliberately wrong formula).
    available:    bytes of memory to plan the float64 reference with (default: what the machine has).
    pair:         a :func:`float64_pair` to reuse.
    max_reference_tokens: run the float64 reference on at most this many first tokens (it is slow on
                  large models; the note says so).
    progress:     ``progress(done, 5)`` after each of the five runs (HF float32, attnkit float32, the
                  float64 copies, HF float64, attnkit float64)."""
    tick = Steps(progress, 5).after
    ids = torch.as_tensor(ids, dtype=torch.long, device=weights.device).reshape(1, -1)
    T = int(ids.shape[1])
    hf32 = tick(_hf_outputs(hf_model, ids))
    ours32 = tick(_ours_outputs(weights, ids, intervention))
    n_params = sum(p.numel() for p in hf_model.parameters())
    n, note = reference_tokens(weights.config, n_params, T, available)
    if max_reference_tokens is not None and max_reference_tokens < n:
        n, note = max_reference_tokens, f"the float64 reference runs on the first {max_reference_tokens} of {T} tokens"
    hf64, w64 = tick(pair or float64_pair(hf_model, weights))
    ids64 = ids[:, :n].cpu()
    ref = tick(_hf_outputs(hf64, ids64))
    ours64 = tick(_ours_outputs(w64, ids64, intervention))
    rows, fam = [], weights.config.family
    for l in range(weights.config.n_layers):
        h32, o32 = hf32["hidden"][l], ours32["hidden"][l]
        rows.append(LayerDiff(
            layer=l, hidden_abs=(o32 - h32).abs().max().item(), hidden_max=h32.abs().max().item(),
            pattern=_check("pattern", ours32["pattern"][l], hf32["pattern"][l],
                           ours64["pattern"][l], ref["pattern"][l], n, fam),
            hidden=_check("hidden", o32, h32, ours64["hidden"][l], ref["hidden"][l], n, fam)))
    return Report(
        model=name, device=str(weights.device), n_tokens=T, layers=rows,
        ln_final=_check("ln_final", ours32["ln_final"], hf32["ln_final"], ours64["ln_final"], ref["ln_final"], n, fam),
        logits=_check("logits", ours32["logits"], hf32["logits"], ours64["logits"], ref["logits"], n, fam),
        logits_abs=(ours32["logits"] - hf32["logits"]).abs().max().item(),
        reference={"dtype": "float64", "device": "cpu", "n_tokens": n,
                   "note": "; ".join(x for x in (note, getattr(hf64, "attnkit_note", "")) if x)},
        versions=versions(weights.device),
    )


# ----------------------------------------------------------------------------- generation

@dataclass
class GenerationCheck:
    """Greedy decoding with attnkit's KV cache against HF's ``generate``."""

    n_prompt: int
    tokens: list[int]          # attnkit's new tokens
    hf_tokens: list[int]       # HF generate's new tokens
    logits_abs: float          # attnkit float32 vs HF float32: max |Δ| of the next-token logits over all steps
    cache_heads: int           # key/value heads per layer in attnkit's cache
    n_kv_heads: int
    n_heads: int
    cache_rel: float           # max |Δ| / max |entry| between attnkit's and HF's cached keys and values
    cache_positions: int       # positions attnkit's cache holds per layer
    cache_bytes: int           # attnkit's cache
    full_head_bytes: int       # the same cache with one key/value head per query head
    step_logits: Check | None = None   # every step's logits against HF float64 on attnkit's tokens

    @property
    def ok(self) -> bool:
        return (self.tokens == self.hf_tokens and (self.step_logits is None or self.step_logits.ok)
                and self.cache_heads == self.n_kv_heads and self.cache_rel <= TOL_CACHE_REL)

    def failure(self) -> str:
        if self.tokens != self.hf_tokens:
            return "greedy generation chose other tokens than HF generate"
        if self.cache_heads != self.n_kv_heads:
            return "the KV cache holds the wrong number of key/value heads"
        if self.cache_rel > TOL_CACHE_REL:
            return f"the KV cache differs from HF's by {self.cache_rel:.2e} (relative; allowed {TOL_CACHE_REL:g})"
        return "generation's step logits are further from the exact answer than HuggingFace's"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["step_logits"] = self.step_logits.row() if self.step_logits is not None else None
        d["ok"] = self.ok
        return d

    def line(self) -> str:
        same = "equal to" if self.tokens == self.hf_tokens else "DIFFERENT from"
        s = self.step_logits
        err = (f"step logits error vs float64 attnkit {s.ours:.2e}, HF {s.hf:.2e} (allowed {s.allowed:.2e})"
               if s is not None else f"step logits max|Δ| {self.logits_abs:.3e}")
        return (f"greedy generation with the KV cache: {len(self.tokens)} tokens {same} HF generate's, {err}; "
                f"cache holds {self.cache_heads} key/value heads "
                f"(model: {self.n_kv_heads} kv / {self.n_heads} query heads), {self.cache_bytes:,} bytes "
                f"({self.cache_bytes / self.full_head_bytes:.2f}× a full-head cache), cache relative max|Δ| "
                f"vs HF {self.cache_rel:.2e}")


def _hf_cache_layers(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer of an HF cache (transformers 5 ``layers``, or 4.x tuples/lists)."""
    if cache is None:
        return []
    if hasattr(cache, "self_attention_cache"):   # an encoder-decoder cache (GPT-2 with add_cross_attention): the
        cache = cache.self_attention_cache       # decoder's own keys and values; no encoder, no cross-attention run
    if hasattr(cache, "layers"):
        return [(l.keys, l.values) for l in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]


def _cache_rel(hf_cache, cache) -> float:
    rel = 0.0
    for (k_hf, v_hf), k, v in zip(_hf_cache_layers(hf_cache), cache.keys, cache.values):
        for a, b in ((k_hf, k), (v_hf, v)):
            n = min(a.shape[-2], b.shape[-2])
            if a.shape[:2] != b.shape[:2]:
                rel = float("inf")
                continue
            a, b = a[..., a.shape[-2] - n:, :].float(), b[..., b.shape[-2] - n:, :].float()
            rel = max(rel, (a - b).abs().max().item() / max(a.abs().max().item(), 1e-30))
    return rel


def _step_check(ours_steps, hf_steps, ours64_steps, ref_steps, family: str) -> Check:
    """Step logits [steps, V] each; HF's are compared over the steps it shares with attnkit."""
    ref = torch.stack([r.reshape(-1) for r in ref_steps])
    a = torch.stack([x.reshape(-1) for x in ours_steps]).to("cpu", torch.float64)
    b = torch.stack([x.reshape(-1) for x in hf_steps]).to("cpu", torch.float64)
    o64 = torch.stack([x.reshape(-1) for x in ours64_steps]).to("cpu", torch.float64)
    k = min(len(a), len(b))
    return Check(quantity="step_logits", ours=_err(a, ref, "logits"), hf=_err(b[:k], ref[:k], "logits"),
                 f64=_err(o64, ref, "logits"), direct=_err(a[:k], b[:k], "logits"),
                 f64_tol=TOL.f64_tolerance(family))


@torch.inference_mode()
def compare_generation(hf_model, weights, ids, n_new: int = 8, *, pair=None,
                       progress: Progress | None = None) -> GenerationCheck:
    """Greedy-decode ``n_new`` tokens after ``ids`` with attnkit's KV cache and with HF's
    ``generate(do_sample=False)`` (no end-of-text stop, no repetition penalty), and compare; each step's
    logits are checked against HF float64 run on the prompt and attnkit's tokens (the float64 rule).
    ``progress(done, 4)`` after each of: attnkit's decoding, HF's, HF float64, attnkit float64."""
    cfg = weights.config
    count = Steps(progress, 4)
    tick = count.after
    ids = torch.as_tensor(ids, dtype=torch.long, device=weights.device).reshape(1, -1)
    ours = tick(generate(weights, ids, n_new, use_cache=True))
    ref = hf_model.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new, min_new_tokens=0, do_sample=False,
        num_beams=1, eos_token_id=None, pad_token_id=0, repetition_penalty=1.0, no_repeat_ngram_size=0,
        bad_words_ids=None, suppress_tokens=None, begin_suppress_tokens=None, forced_bos_token_id=None,
        forced_eos_token_id=None, use_cache=True, return_dict_in_generate=True, output_logits=True)
    count.add()
    hf_tokens = ref.sequences[0, ids.shape[1]:].tolist()
    steps = min(len(ref.logits), len(ours.step_logits))
    logits_abs = max(((ref.logits[i][0].float() - ours.step_logits[i].float()).abs().max().item()
                      for i in range(steps)), default=float("inf"))
    hf_steps = [ref.logits[i][0] for i in range(len(ref.logits))
                if ref.sequences[0, ids.shape[1]: ids.shape[1] + i].tolist() == ours.tokens[:i]]
    step = None
    if ours.tokens and hf_steps:
        hf64, w64 = pair or float64_pair(hf_model, weights)
        seq = torch.cat([ids.cpu(), torch.tensor([ours.tokens[:-1]], dtype=torch.long)], dim=1)
        full = tick(hf64(seq, use_cache=False).logits[0, ids.shape[1] - 1:])
        ours64 = tick(generate(w64, ids.cpu(), len(ours.tokens), use_cache=True))
        step = _step_check(ours.step_logits, hf_steps, ours64.step_logits, list(full), cfg.family)
    count.at(4)
    cache = ours.cache
    return GenerationCheck(
        n_prompt=int(ids.shape[1]), tokens=ours.tokens, hf_tokens=hf_tokens, logits_abs=logits_abs,
        cache_heads=int(cache.keys[0].shape[1]), n_kv_heads=cfg.kv_heads, n_heads=cfg.n_heads,
        cache_rel=_cache_rel(getattr(ref, "cache", None) or getattr(ref, "past_key_values", None), cache),
        cache_positions=cache.length, cache_bytes=cache.nbytes(),
        full_head_bytes=cache.nbytes() * cfg.n_heads // cfg.kv_heads, step_logits=step,
    )
