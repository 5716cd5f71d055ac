"""Model families: one class per family turns an HF model into attnkit's standard
:class:`~attnkit.standard.Weights` and says how to walk HF's own layers (for verify).

One table maps HF's ``model_type`` to its family; adding a family is one module with one
:class:`Family` subclass decorated with :func:`register`: its config reader, its checks, and its
:class:`~attnkit.families.layout.Layout` (where each weight lives; the conversion itself is shared).
"""
from __future__ import annotations

from ..standard import ModelConfig, Weights
from .layout import Layout
from .layout import convert as convert_layout

__all__ = ["Family", "FAMILIES", "register", "family_for", "supported_types", "UnsupportedModel"]


class UnsupportedModel(ValueError):
    """A ``model_type`` attnkit has no family for; the message lists the supported ones."""


class Family:
    """How one family of HF checkpoints becomes standard weights.

    name:        short name shown to users ("gpt2", "llama", …)
    model_types: HF ``config.model_type`` values this family converts
    examples:    hub names offered by the model picker
    """

    name: str = ""
    model_types: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    #: the activation functions attnkit implements (see :func:`attnkit.model.act`)
    activations: tuple[str, ...] = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu", "relu", "silu", "swish",
                                     "quick_gelu")

    def config(self, hf_cfg) -> ModelConfig:          # pragma: no cover - abstract
        raise NotImplementedError

    def validate(self, hf_cfg) -> None:
        """Refuse (:class:`UnsupportedModel`, one line naming the field) a config this family cannot compute
        exactly as HF does; ``hf_cfg`` is HF's config or config.json's fields (:func:`checks.raw`)."""

    #: where the family keeps each weight (:class:`~attnkit.families.layout.Layout`), read by :meth:`convert`
    layout: Layout

    def convert(self, hf_model) -> Weights:
        """HF model -> standard weights, by the family's :attr:`layout` (every weight a view of HF's)."""
        return convert_layout(self, hf_model)

    #: the attribute of HF's LM that holds the embeddings and the blocks, and the blocks' list in it
    body: str = "transformer"
    block_list: str = "h"

    def body_of(self, hf_model):
        """The model under the LM head (``hf_model.transformer`` for GPT-2); the bare model itself."""
        return getattr(hf_model, self.body, hf_model)

    def blocks(self, hf_model) -> list:
        """HF's transformer blocks in order (verify hooks their outputs)."""
        return list(getattr(self.body_of(hf_model), self.block_list))

    def check_activation(self, name: str) -> None:
        if name not in self.activations:
            raise UnsupportedModel(
                f"activation function {name!r} is not implemented by attnkit; supported: {', '.join(self.activations)}")


#: model_type -> Family instance
FAMILIES: dict[str, Family] = {}


def register(cls: type[Family]) -> type[Family]:
    inst = cls()
    for t in cls.model_types:
        FAMILIES[t] = inst
    return cls


def supported_types() -> list[str]:
    return sorted(FAMILIES)


def family_for(model_type: str | None) -> Family:
    """The family converting ``model_type``, or :class:`UnsupportedModel` listing those supported."""
    try:
        return FAMILIES[model_type]
    except KeyError:
        raise UnsupportedModel(
            f"model type {model_type or 'unknown'!r} is not supported; attnkit supports: {', '.join(supported_types())}"
        ) from None


# The families register themselves on import.
from . import gpt2, llama, neo, neox  # noqa: E402,F401
