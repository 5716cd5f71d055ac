import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")      # CI has no hub; never wait for it in tests
# AppTest cannot poll a running job (attnkit/app/jobs.py): page runs wait for their jobs to finish. The
# browser tests' servers inherit it unless a test asks for live progress (streamlit_server(env=…)).
os.environ.setdefault("ATTNKIT_JOB_WAIT", "600")

from transformers.utils import logging as hf_logging  # noqa: E402

# Tests build checkpoints with save_pretrained, whose "Writing model shards" bar goes to stderr. attnkit
# turns HF's bars off when it loads a model (loading._build), so without this a test that reads a CLI's
# stderr after building a checkpoint passes or fails depending on whether an earlier test loaded one.
hf_logging.disable_progress_bar()

from helpers import make_checkpoint  # noqa: E402


@pytest.fixture(scope="session")
def small_dir(tmp_path_factory):
    """GPT-2 small's exact shape (GPT2Config(): 12 layers, 12 heads, d_model 768, 1024 positions)."""
    return make_checkpoint(tmp_path_factory.mktemp("gpt2-small-shape"))


@pytest.fixture(scope="session")
def odd_dir(tmp_path_factory):
    """A non-standard GPT-2: 3 layers, 6 heads, d_model 192, another LayerNorm epsilon."""
    return make_checkpoint(tmp_path_factory.mktemp("gpt2-odd"), seed=1, n_layer=3, n_head=6, n_embd=192,
                           n_positions=256, vocab_size=1000, layer_norm_epsilon=1e-6)


@pytest.fixture(scope="session")
def small(small_dir):
    from attnkit.loading import load

    return load(str(small_dir), "cpu")


@pytest.fixture(scope="session")
def odd(odd_dir):
    from attnkit.loading import load

    return load(str(odd_dir), "cpu")
