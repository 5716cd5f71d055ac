"""attnkit: attention rebuilt from a model's own weights, checked against HuggingFace.

The names below are re-exported lazily (PEP 562), so ``import attnkit`` — and so
``python -m attnkit --help`` — does not import torch until one of them is used.
"""
import importlib

__version__ = "0.2.0"

_EXPORTS = {
    "Weights": "weights", "LayerWeights": "weights", "ModelConfig": "weights",
    "extract": "weights", "head_name": "weights", "param_counts": "weights", "attention_weight_count": "weights",
    "HOOK_POINTS": "model", "Intervention": "model", "compose": "model", "KVCache": "model", "Trace": "model",
    "generate": "model", "run": "model", "Keep": "attention",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")
