"""Keeping and sharing work: the URL carries the view, the Run button, the <|endoftext|> switch,
and the library pieces moved out of the Compare page."""
import numpy as np
import torch

from attnkit import app as ui
from attnkit import compare
from attnkit.model import run
from helpers import apptest


def test_a_link_opens_the_same_head(odd_dir):
    at = apptest("pages/1_Heatmaps.py", odd_dir, text="The animal didn't cross the street because it was tired.")
    at.query_params["layer"] = "2"
    at.query_params["head"] = "4"
    at.run()
    assert not at.exception
    assert at.selectbox(key="hm_layer").value == 2 and at.selectbox(key="hm_head").value == 4


def test_the_frame_writes_the_view_into_the_url(odd_dir):
    text = "A short prompt to share."
    at = apptest("app.py", odd_dir, text=text).run()
    assert not at.exception
    assert at.query_params["prompt"] == [text] or at.query_params["prompt"] == text
    assert "folder" in at.query_params
    long = "word " * 200
    at = apptest("app.py", odd_dir, text=long).run()
    assert "prompt" not in at.query_params
    assert any("not kept in the page's link" in c.value for c in at.sidebar.caption)


def test_a_bad_value_in_the_link_falls_back(odd_dir):
    at = apptest("pages/1_Heatmaps.py", odd_dir, text="Some text here.")
    at.query_params["layer"] = "many"
    at.query_params["view"] = "<script>"
    at.run()
    assert not at.exception and not at.error


def test_run_button_and_prepend_bos(odd_dir, odd):
    at = apptest("app.py", odd_dir, text="Hello there").run()
    assert any(b.label == "Run" for b in at.button)
    plain = at.session_state["ak_text"]
    at.toggle(key="ak_bos").set_value(True).run()
    assert not at.exception
    ctx = ui.Context(model=odd, model_name="odd", device="cpu", prompts=[plain], index=0, prepend_bos=True)
    assert ctx.ids[0] == odd.tokenizer.eos_token_id and ctx.ids[1:] == odd.encode(plain)
    assert ui.meta_for(ctx)["prepend_bos"] is True


def test_head_similarity_in_the_library(odd):
    ids = odd.encode("The animal didn't cross the street because it was too tired, it said.")
    tr = run(odd.weights, ids, capture=["pattern"])
    heads = [(l, h) for l in range(odd.config.n_layers) for h in range(odd.config.n_heads)]
    sim = compare.head_similarity(lambda l: tr["pattern", l][0], heads, len(ids))
    stack = torch.stack([tr["pattern", l][0, h] for l, h in heads])
    ref = compare.distance_matrix(stack).numpy()
    np.testing.assert_allclose(sim.distance, ref, atol=1e-12)
    assert sorted(sim.order) == list(range(len(heads)))
    nb = sim.neighbours()
    assert len(nb) == len(heads) and (nb["distance to it"] >= 0).all()
    np.testing.assert_allclose(sim.similarity, 1 - ref)


def test_compare_opens_the_top_heads_of_the_chosen_statistic(odd_dir, odd):
    from attnkit import metrics

    text = "one two three four one two three four"
    at = apptest("pages/2_Compare_heads.py", odd_dir, text=text).run()
    at.selectbox(key="cmp_stat").set_value("previous-token").run()
    assert not at.exception and at.session_state["cmp_open_for"] == "previous-token"
    # independently: the two heads with the highest previous-token score on this prompt
    ids = odd.encode(text)
    tr = run(odd.weights, ids, capture=["pattern"])
    scores = torch.stack([metrics.head_scores(tr["pattern", l][0], ids)["previous-token"]
                          for l in range(odd.config.n_layers)])                  # [L, H]
    top = torch.argsort(scores.reshape(-1), descending=True)[:2].tolist()
    H = odd.config.n_heads
    assert list(at.session_state["cmp_open"]) == [compare.head_name(i // H, i % H) for i in top]


def test_compare_undefined_statistic_is_a_message_not_a_grid(odd_dir):
    at = apptest("pages/2_Compare_heads.py", odd_dir, text="The animal didn't cross").run()
    at.selectbox(key="cmp_stat").set_value("duplicate-token").run()
    assert not at.exception
    assert any("undefined on this prompt" in i.value for i in at.info)


def test_a_link_to_a_local_folder_restores_the_folder(odd_dir):
    at = apptest("pages/1_Heatmaps.py", None, text="Some text here.")
    at.query_params["model"] = ui.LOCAL
    at.query_params["folder"] = str(odd_dir)
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["ak_model"] == ui.LOCAL and at.session_state["ak_folder"] == str(odd_dir)
