"""Every float tolerance attnkit and its tests use, in one place, each with the noise it was chosen from.

Verdicts compare against an exact answer, not against another float32 run: HuggingFace run in
float64 (on the CPU) is the reference. For each checked quantity attnkit's float32 error and
HuggingFace's own float32 error are measured against it, and

    attnkit's error ≤ FACTOR × HuggingFace's error + FLOOR

is a pass: "attnkit is as close to the exact answer as HuggingFace itself is". float32 rounding
grows with the length and the depth, and it grows the same way in both implementations, so the rule
holds at every length; a wrong formula (a missing 1/√d, a mask shifted by one) puts attnkit orders of
magnitude further from the reference than HuggingFace. The float64 check (attnkit in float64 against
HuggingFace in float64, ≤ TOL_F64) is the one that catches a wrong formula on its own.

Errors are unit-free: attention patterns (which lie in [0, 1]) in absolute terms; hidden states, the
final norm and the logits relative to the reference's largest entry (GPT-2's residual stream reaches
the thousands).

This module imports nothing heavy: the bench and the tests use :func:`verdict` and the constants.
"""
from __future__ import annotations

import math

from .i18n import msg

__all__ = ["FACTOR", "FLOOR", "TOL_F64", "TOL_F64_MIXED", "F64_MIXED_FAMILIES", "f64_tolerance", "RULE", "verdict", "allowed", "TOL_PATTERN", "TOL_LOGITS",
           "TOL_HIDDEN_REL", "TOL_CACHE_REL", "ZERO_ATOL", "CORPUS_ATOL", "TOL_SCORE_REL", "TOL_ATLAS_F64"]

# ----------------------------------------------------------------------------- the float64 rule (verify)

#: attnkit's float32 error may be this many times HuggingFace's own float32 error.
#: Measured (attnkit.verify.compare on attnkit-tiny at 8, 64, 256, 1,024 tokens and on 2-layer random
#: GPT-2, SmolLM2, Qwen2.5, Mistral (window), Pythia and GPT-Neo checkpoints at 8, 64, 200 tokens, plus
#: generation's step logits; 138 checks where HF's error > 1e-7): attnkit / HF lies in 0.62–2.82.
FACTOR = 4.0
#: …plus this much, for quantities where HF's own error happens to be (near) 0: float32's unit
#: roundoff is 6e-8; the largest attnkit error measured where HF's was ≤ 1e-7 was 1.2e-7 (23 checks).
#: A wrong formula is ≥ 1e4 × the allowed error in every measured case.
FLOOR = 1e-6
#: attnkit in float64 against HuggingFace in float64, where HF computes everything in the model's dtype
#: (GPT-2). Measured ≤ 5.8e-14 (attnkit-tiny at 1,024 tokens, patterns, hidden, logits); 1e-9 leaves four
#: orders of magnitude for larger models while a wrong formula gives ≥ 0.1.
TOL_F64 = 1e-9
#: Families whose HF code keeps some steps in float32 even in a float64 model (Llama/Qwen2/Mistral: RMSNorm
#: and the softmax; GPT-NeoX: the softmax; GPT-Neo: q·kᵀ and the softmax), so HF's "float64" carries
#: float32 rounding there. Measured attnkit float64 vs HF float64 on 2-layer random checkpoints of each,
#: 8–200 tokens: ≤ 1.2e-6 (GPT-Neo), ≤ 3.1e-7 (the others); a wrong formula (no 1/√d, the mask shifted by
#: one) gives ≥ 0.17. 1e-4 sits between them with room for deeper models and longer inputs.
TOL_F64_MIXED = 1e-4
F64_MIXED_FAMILIES = frozenset({"llama", "gpt_neox", "gpt_neo"})


def f64_tolerance(family: str) -> float:
    """The float64-vs-float64 bound for a family (see TOL_F64, TOL_F64_MIXED)."""
    return TOL_F64_MIXED if family in F64_MIXED_FAMILIES else TOL_F64

RULE = msg("attnkit's float32 error ≤ {factor} × HuggingFace's own float32 error + {floor}, both measured against "
           "HuggingFace in float64; and attnkit in float64 within {f64} of HuggingFace in float64 ({mixed} for "
           "families whose HF code computes some steps in float32)", factor=f"{FACTOR:g}", floor=f"{FLOOR:g}",
           f64=f"{TOL_F64:g}", mixed=f"{TOL_F64_MIXED:g}")


def allowed(err_hf: float, factor: float | None = None, floor: float | None = None) -> float:
    """The largest error attnkit may have where HuggingFace's own is ``err_hf``."""
    return (FACTOR if factor is None else factor) * err_hf + (FLOOR if floor is None else floor)


def verdict(err_ours: float, err_hf: float, factor: float | None = None, floor: float | None = None) -> bool:
    """True when attnkit is as close to the exact answer as HuggingFace itself is (see :data:`RULE`).
    NaN or ∞ in either error is a fail."""
    if not (math.isfinite(err_ours) and math.isfinite(err_hf)):
        return False
    return err_ours <= allowed(err_hf, factor, floor)


# ----------------------------------------------------------------------------- float32 against float32

#: attnkit float32 against HuggingFace float32 directly: what the tests assert on their small random
#: checkpoints (on attnkit-tiny at 1,024 tokens the direct difference reaches 2.5e-5 in the patterns and
#: 5e-4 in the logits, which is why verify's verdict uses the float64 rule instead). Measured on the tests'
#: GPT-2 (odd, small shape), SmolLM2, Qwen2.5, Mistral, Pythia and GPT-Neo checkpoints at 8–200 tokens:
TOL_PATTERN = 1e-5       # patterns, absolute; measured ≤ 8.6e-7
TOL_LOGITS = 1e-4        # logits, absolute; measured ≤ 2.6e-6
TOL_HIDDEN_REL = 1e-5    # hidden states, relative to the largest entry; measured ≤ 8.2e-7
#: KV cache keys/values against HF's cache after greedy generation, relative; measured ≤ 1.2e-6.
TOL_CACHE_REL = TOL_HIDDEN_REL

# ----------------------------------------------------------------------------- same maths, other batch shapes

#: Something that is 0 in exact arithmetic but computed from runs of different batch shapes (patching a
#: position where the two prompts agree, against the unpatched run), or exactly 1 as a ratio of such
#: differences. Measured (tests/test_patching.py's pair, OMP_NUM_THREADS 1 and 2): ≤ 5.1e-8 for the
#: zeros, 1.0e-7 for the one; the normalised effects divide by a logit gap > 1.
ZERO_ATOL = 1e-6
#: The corpus engine's entropy curves (its worker's thread count and batch) against one direct pass:
#: measured 1.25e-6 absolute under OMP_NUM_THREADS=2 (entropies up to 2.5 nats), 0 under 1.
CORPUS_ATOL = 1e-5

# ----------------------------------------------------------------------------- score terms

#: A score split into query-part × key-part terms (attnkit.score_terms, float64 arithmetic on a float32
#: model's activations) against the model's own float32 score, relative to Σ|terms| (the size the float32
#: rounding of the parts scales with). Measured on the tests' random GPT-2, SmolLM2, Qwen2.5, Mistral, Pythia
#: and GPT-Neo checkpoints (layer 2, every head, 3 keys each, 24 tokens): ≤ 1.5e-7 (GPT-Neo), ≤ 3e-8 (GPT-2).
#: Float64 models: TOL_F64 against a float64 recomputation (the model's RMSNorm rounds to float32, as HF's).
TOL_SCORE_REL = 2e-6

# ----------------------------------------------------------------------------- the head atlas

#: A head statistic of one window from the float32 run against the same statistic from a float64 run of the
#: same weights (attnkit.atlas's float64 check; unit scale: shares of attention and normalised entropy as they
#: are, mean distance over T − 1). Measured: ≤ 3.0e-7 on attnkit-tiny at 64 and 1,024 tokens (plain and without
#: position 0); a wrong formula (a statistic of another pattern) is ≥ 1e-2.
TOL_ATLAS_F64 = 1e-5
