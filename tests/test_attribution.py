"""Direct logit attribution adds up, the logit lens ends at the model's logits, contributions are shares."""
from __future__ import annotations

import json

import numpy as np
import torch

from attnkit import attribution as AT
from attnkit.cli.attribute import cli as attribute_cli
from attnkit.model import run

TEXT = "The animal didn't cross the street because it was too tired."


def test_dla_parts_sum_to_logit_difference_gpt2_small_shape(small):
    ids = small.encode(TEXT)
    a, d = small.encode(" it")[0], small.encode(" the")[0]
    for pos in (-1, 3):
        dla = AT.direct_logit_attribution(small.weights, ids, a, d, pos)
        logits = run(small.weights, ids).logits[0, pos]
        actual = float(logits[a] - logits[d])
        assert abs(dla.actual - actual) < 1e-5
        assert abs(dla.total - actual) <= 1e-4, (dla.total, actual)
        cfg = small.config
        assert dla.head_map.shape == (cfg.n_layers, cfg.n_heads)
        kinds = set(dla.kinds)
        assert {"embed", "pos_embed", "head", "attn_bias", "mlp", "norm_bias"} <= kinds
        assert len(dla.values) == 2 + cfg.n_layers * (cfg.n_heads + 2) + 1 + (small.weights.b_U is not None)


def test_dla_on_odd_and_head_vocab_agree(odd):
    ids = odd.encode(TEXT)
    a, d = odd.encode(" it")[0], odd.encode(" the")[0]
    dla = AT.direct_logit_attribution(odd.weights, ids, a, d)
    assert abs(dla.total - dla.actual) <= 1e-4
    hv = AT.head_vocab(odd.weights, ids, -1, k=odd.config.d_vocab)        # every token: full ranking
    for l, h in [(0, 0), (2, 5)]:
        ids_up, vals = hv.promoted_ids[l, h], hv.promoted[l, h]
        val = dict(zip(ids_up.tolist(), vals.tolist()))
        assert abs((val[a] - val[d]) - dla.head_map[l, h]) < 1e-4
        assert np.all(np.diff(vals) <= 0) and np.all(np.diff(hv.suppressed[l, h]) >= 0)
    df = hv.frame(0, 0, lambda t: odd.token_strs([t])[0])
    assert set(df["direction"]) == {"promoted", "suppressed"}


def test_logit_lens_last_layer_equals_logits(odd):
    ids = odd.encode(TEXT)
    tr = run(odd.weights, ids, capture=["resid_post"])
    L = odd.config.n_layers
    assert torch.equal(AT.lens_logits(odd.weights, tr["resid_post", L - 1][0]), tr.logits[0])
    a = odd.encode(" it")[0]
    lens = AT.logit_lens(odd.weights, ids, a, k=3)
    assert lens.top_ids.shape == (L + 1, len(ids), 3) and lens.rows[0] == "embed"
    assert np.array_equal(lens.top_ids[-1, :, 0], tr.logits[0].argmax(-1).numpy())
    probs = torch.softmax(tr.logits[0].double(), -1)
    assert np.allclose(lens.answer_prob[-1], probs[:, a].numpy(), atol=1e-6)
    ranks = 1 + (tr.logits[0] > tr.logits[0, :, a : a + 1]).sum(-1)
    assert np.array_equal(lens.answer_rank[-1], ranks.numpy())
    df = lens.frame(odd.token_strs(ids), lambda t: odd.token_strs([t])[0])
    assert len(df) == (L + 1) * len(ids) and {"top_token", "answer_rank"} <= set(df.columns)


def test_contributions_are_shares(odd):
    ids = odd.encode(TEXT)
    con = AT.contributions(odd.weights, ids)
    L, H, T = odd.config.n_layers, odd.config.n_heads, len(ids)
    assert con.heads.shape == (L, H, T, T) and con.resid.shape == (L, T)
    total = con.heads.sum((1, 3)) + con.resid
    assert np.allclose(total, 1.0, atol=1e-9)
    assert np.all(np.triu(con.edges[0], 1) == 0)            # nothing flows from a later position
    nodes, edges = AT.graph_edges(con, 0.05, odd.token_strs(ids))
    assert len(nodes) == (L + 1) * T and (edges["share"] >= 0.05).all()
    assert (edges["from_pos"] <= edges["to_pos"]).all()
    _, none = AT.graph_edges(con, 1.01)
    assert none.empty
    _, top = AT.graph_edges(con, 0.0, top=7)                  # the 7 largest shares of all edges, order kept
    _, every = AT.graph_edges(con, 0.0)
    assert len(top) == 7 and len(every) > 7
    assert sorted(top["share"], reverse=True) == sorted(every["share"], reverse=True)[:7]
    assert list(top.index) == list(range(7)) and top["layer"].is_monotonic_increasing
    assert all(n.startswith("L") and "H" in n for n in every.loc[every["kind"] == "attention", "top_head"])


def test_attribute_cli_json(odd_dir, tmp_path, capsys):
    out = tmp_path / "attr.json"
    rc = attribute_cli(["--model", str(odd_dir), "--clean", TEXT, "--corrupt", TEXT.replace(".", "!"),
                 "--answer", " it", "--distractor", " the", "--json", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    for which in ("clean", "corrupt"):
        r = res[which]
        assert abs(sum(p["logit_diff"] for p in r["parts"]) - r["actual_logit_diff"]) <= 1e-4
        assert len(r["logit_lens"]["answer_rank"]) == 4
    capsys.readouterr()
    rc = attribute_cli(["--model", str(odd_dir), "--clean", TEXT, "--corrupt", TEXT, "--answer", "zebra",
                 "--distractor", " the"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "single token" in err
