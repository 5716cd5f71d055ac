"""Planted-circuit models (issue 35): checkpoints whose mechanism is set by hand and stated in CIRCUIT.json.

``python -m attnkit.dev.planted [FOLDER]`` rebuilds them all (deterministically: seeded generators) into
attnkit/models/ (or FOLDER). GPT-2 family models and what they share: :mod:`.gpt2`; the Llama one: :mod:`.llama`; the one with decoys (issue
45): :mod:`.decoys`.
"""
from __future__ import annotations

from pathlib import Path

from . import decoys, gpt2, llama

__all__ = ["build_all", "NAMES"]

NAMES = [*gpt2.specs(), "planted-llama", "planted-decoys"]


def build_all(out: Path = gpt2.MODELS_DIR) -> list[Path]:
    paths = [gpt2.write(spec, out / name, seed) for seed, (name, spec) in enumerate(gpt2.specs().items())]
    paths.append(gpt2.save(llama.build_model(), llama.CIRCUIT, llama.MECHANISM, out / "planted-llama",
                           family="Llama", extra=f", rotary θ {llama.THETA:g}, grouped-query attention: "
                           f"{llama.KV} key/value heads, gated SiLU MLP",
                           pos=f"no position embedding (rotary); CONST {llama.CONST} (1 in every token)",
                           distractors=llama.DISTRACTORS))
    paths.append(decoys.write(out / "planted-decoys"))
    return paths
