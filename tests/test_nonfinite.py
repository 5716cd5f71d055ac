"""NaN and Inf: weights holding them are refused naming the tensor, verify names where NaN first
appears, and entropy gives no verdict on NaN.
"""
from __future__ import annotations

import torch

from hostile import edit_weights, refused, tiny_dir, variant


def test_nan_weights_are_refused_naming_the_tensor(tiny_dir, tmp_path):
    def poison(sd):
        sd["transformer.h.1.mlp.c_fc.weight"][0, 0] = float("nan")
    refused(variant(tiny_dir, tmp_path, edit=edit_weights(poison)), "NaN", "transformer.h.1.mlp.c_fc.weight")


def test_verify_names_where_nan_first_appears(odd):
    from attnkit import verify as V

    rep = V.compare(odd.hf_model, odd.weights, torch.tensor(odd.encode("Hello there")))
    rep.layers[1].hidden.ours = float("nan")
    assert rep.first_nonfinite == "layer 1" and not rep.ok
    assert "NaN/Inf first appears at layer 1" in rep.table()


def test_entropy_gives_no_verdict_on_nan(odd):
    import numpy as np

    from attnkit import entropy as E

    ids = odd.encode("Attention lets every token look back at the tokens before it.")
    s = E.profile_documents(odd.weights, [ids])
    s.mean["entropy"] = s.mean["entropy"].copy()
    s.mean["entropy"][2, 0, 3] = np.nan
    verdict, why = E.claim_check(s)
    assert verdict == "undetermined" and "layer 2" in why
