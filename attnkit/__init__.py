"""attnkit: attention rebuilt from a model's own weights, checked against HuggingFace."""
from .weights import GPT2Weights, LayerWeights, ModelConfig, Weights, extract, param_counts, attention_weight_count
from .model import HOOK_POINTS, Intervention, KVCache, Trace, compose, generate, run

__version__ = "0.2.0"

__all__ = [
    "Weights", "GPT2Weights", "LayerWeights", "ModelConfig", "extract", "param_counts", "attention_weight_count",
    "HOOK_POINTS", "Intervention", "compose", "KVCache", "Trace", "generate", "run",
]
