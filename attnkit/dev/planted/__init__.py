"""Planted-circuit models (issue 35): checkpoints whose mechanism is set by hand and stated in CIRCUIT.json.

``python -m attnkit.dev.planted [FOLDER]`` rebuilds them all (deterministically: seeded generators) into
attnkit/models/ (or FOLDER). GPT-2 family models and what they share: :mod:`.gpt2`; the Llama one: :mod:`.llama`; the one with decoys (issue
45): :mod:`.decoys`.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from ...cli.outputs import swap_in
from . import decoys, gpt2, llama

__all__ = ["build_all", "NAMES", "MARKER"]

NAMES = [*gpt2.specs(), "planted-llama", "planted-decoys"]
#: Written into a folder the builder fills (not the shipped one): how a rebuild knows the folder is its own.
MARKER = ".attnkit-planted.json"


def build_all(out: Path = gpt2.MODELS_DIR) -> list[Path]:
    """Build every planted model into ``out``. Each is built in a hidden folder inside ``out`` and moved into
    place when all are complete (an earlier one is replaced only then): a failed build leaves ``out`` as it
    was. Nothing else in ``out`` is touched."""
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".planted-build-", dir=out))
    try:
        built = [gpt2.write(spec, work / name, seed) for seed, (name, spec) in enumerate(gpt2.specs().items())]
        built.append(gpt2.save(llama.build_model(), llama.CIRCUIT, llama.MECHANISM, work / "planted-llama",
                               family="Llama", extra=f", rotary θ {llama.THETA:g}, grouped-query attention: "
                               f"{llama.KV} key/value heads, gated SiLU MLP",
                               pos=f"no position embedding (rotary); CONST {llama.CONST} (1 in every token)",
                               distractors=llama.DISTRACTORS))
        built.append(decoys.write(work / "planted-decoys"))
        if out.resolve() != gpt2.MODELS_DIR.resolve():
            (out / MARKER).write_text(json.dumps({"written_by": "python -m attnkit.dev.planted", "models": NAMES},
                                                 indent=1) + "\n", encoding="utf-8")
        return [swap_in(b, out / b.name) for b in built]
    finally:
        shutil.rmtree(work, ignore_errors=True)
