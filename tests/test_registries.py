"""Adding a corpus analysis is one class plus one registration line: the run, its summary, the CLI's
--analyses and its help all pick it up (docs/developers.md shows the same class)."""
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch

from attnkit import corpus as C
from attnkit.corpus import analyses as CA
from attnkit.model import run


class LastToken(CA.Analysis):
    """Per window, layer and head: the attention the last query pays to itself."""

    name, table, help = "last-token", "last_token", "per window, layer and head: a_TT, the last token on itself"

    def columns(self):
        return CA.LAYER_HEAD + [("last_self", pa.float64())]

    def compute(self, batch, hook=None, intervention=None):
        pats = run(batch.weights, batch.ids, capture=["pattern"]).stack("pattern")     # [L, B, H, T, T]
        last = pats[..., -1, -1].permute(1, 0, 2)                                        # [B, L, H]
        return {**batch.per_head_key(), "last_self": last.reshape(-1).double().tolist()}

    def summarise(self, s):
        t = pd.concat([s.read(self.table, k).to_pandas() for k in s.shards])
        return t.groupby(["layer", "head"], as_index=False)["last_self"].mean(), {}


@pytest.fixture
def last_token():
    CA.register(LastToken())
    yield LastToken.name
    CA.ANALYSES.pop(LastToken.name)


def test_a_registered_corpus_analysis_runs_summarises_and_reaches_the_cli(last_token, tmp_path, capsys):
    from attnkit.cli import main
    from attnkit.loading import load

    texts = ["The cat sat on the mat and the cat sat again.", "A dog ran in the park today, and then home."]
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    rep = C.run_corpus(docs, tmp_path / "out", model="attnkit-tiny", analyses=(last_token,), window=8, batch=2,
                       shard_docs=2, bootstrap=0)
    assert rep.processed_docs == 2
    got = pd.read_parquet(tmp_path / "out" / "last_token").sort_values(["doc", "window", "layer", "head"])
    m = load("attnkit-tiny", "cpu")
    first = m.encode(texts[0])[:8]
    want = run(m.weights, torch.tensor([first]), capture=["pattern"]).stack("pattern")[:, 0, :, -1, -1]   # [L, H]
    row = got[(got["doc"] == 0) & (got["window"] == 0)]
    np.testing.assert_allclose(row["last_self"].to_numpy(), want.reshape(-1).double().numpy(), rtol=0, atol=1e-6)
    assert (tmp_path / "out" / "summary" / "last_token.parquet").exists()

    assert main(["corpus", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps, also at hyphens
    assert "last-token: per window, layer and head: a_TT" in out and "ablation-loss, last-token" in out
