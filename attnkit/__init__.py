"""attnkit: attention rebuilt from a model's own weights, explained, and checked against HuggingFace.

In a notebook (every result has ``.to_pandas()``, ``.chart()``, ``.save(path)`` and shows itself in Jupyter)::

    import attnkit
    m = attnkit.load("attnkit-tiny")                 # shipped names, hub names or a folder; lang="zh" for Chinese
    r = m.run("When Mary and John went to the store, John gave a drink to")
    r.tokens, r.logits, r["pattern", 1]              # every activation (TransformerLens's run_with_cache)
    r.pattern("L1H3")                                # one head's pattern, drawn as the Heatmaps page draws it
    m.heads(text)                                    # head statistics of the PATTERN (where heads look)
    m.entropy(texts), m.ablate("v=x", texts)         # entropy against length; a seed's claim and its verdict
    pair = m.pair(clean, corrupt, " Mary", " John")
    m.patch(pair), m.attribute(clean, " Mary", " John"), m.circuit(pair), m.composition()
    m.why(text, "L1H3", query=-1, key=5)             # why that head attends there: its score split exactly
    m.verify(text)                                   # attnkit against HuggingFace, layer by layer

The core underneath: ``run(weights, ids, capture=..., hooks=..., intervention=...)`` -> ``Trace`` (every hook point
in ``HOOK_POINTS``), ``generate``, ``KVCache``, the standard ``Weights``. The command line is ``attnkit <command>``
(``attnkit --help``; ``attnkit app`` starts the dashboard).

The names are re-exported lazily (PEP 562), so ``import attnkit`` — and so ``attnkit --help`` — does not import
torch until one of them is used.
"""
import importlib

__version__ = "0.2.0"

_EXPORTS = {
    "Weights": "weights", "LayerWeights": "weights", "ModelConfig": "weights",
    "extract": "weights", "head_name": "weights", "param_counts": "weights", "attention_weight_count": "weights",
    "HOOK_POINTS": "model", "Intervention": "model", "compose": "model", "KVCache": "model", "Trace": "model",
    "generate": "model", "run": "model", "Keep": "attention",
    **{name: "notebook" for name in (
        "load", "Model", "Run", "Result", "Pattern", "HeadStats", "Entropy", "Matrix", "CacheDemo", "Ablation",
        "Patching", "Attribution", "Composition", "Circuit", "Why", "Verify", "Atlas", "softmax_table",
        "seed_matrices", "Sinks", "Eviction")},
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")


def __dir__():
    """The module's own names and every lazily exported one (so ``help(attnkit)`` lists them all)."""
    return sorted(set(globals()) | set(__all__))
