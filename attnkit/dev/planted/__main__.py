"""``python -m attnkit.dev.planted [FOLDER]``: rebuild every planted model."""
import sys
from pathlib import Path

from . import build_all, gpt2

for path in build_all(Path(sys.argv[1]) if len(sys.argv) > 1 else gpt2.MODELS_DIR):
    print(f"wrote {path}")
