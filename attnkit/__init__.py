"""attnkit: GPT-2's attention rebuilt from its own weights, checked against HuggingFace."""
from .weights import GPT2Weights, LayerWeights, ModelConfig, extract, param_counts, attention_weight_count
from .model import Intervention, KVCache, Trace, generate, run

__version__ = "0.1.0"

__all__ = [
    "GPT2Weights", "LayerWeights", "ModelConfig", "extract", "param_counts", "attention_weight_count",
    "Intervention", "KVCache", "Trace", "generate", "run",
]
