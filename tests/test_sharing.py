"""Keeping and sharing work: the URL carries the view, the Run button, the <|endoftext|> switch,
and the library pieces moved out of the Compare page."""
import numpy as np
import torch

from attnkit import app as ui
from attnkit import compare
from attnkit.model import run
from helpers import apptest, selectbox


def test_a_link_opens_the_same_head(odd_dir):
    at = apptest("heatmaps", odd_dir, text="The animal didn't cross the street because it was tired.")
    at.query_params["layer"] = "2"
    at.query_params["head"] = "4"
    at.run()
    assert not at.exception
    assert at.selectbox(key="hm_layer").value == 2 and selectbox(at, "hm_head").value == 4


def test_the_frame_writes_the_view_into_the_url(odd_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text = "A short prompt to share."
    at = apptest("home", odd_dir, text=text).run()
    assert not at.exception
    assert at.query_params["prompt"] == [text] or at.query_params["prompt"] == text
    assert "folder" in at.query_params
    long = "word " * 200
    at = apptest("home", odd_dir, text=long).run()
    assert "prompt" not in at.query_params
    sha = at.query_params["prompt_sha"]
    sha = sha[0] if isinstance(sha, list) else sha
    assert (tmp_path / "attnkit" / "prompts" / f"{sha}.txt").read_text(encoding="utf-8") == long


def test_a_bad_value_in_the_link_falls_back(odd_dir):
    at = apptest("heatmaps", odd_dir, text="Some text here.")
    at.query_params["layer"] = "many"
    at.query_params["view"] = "<script>"
    at.run()
    assert not at.exception and not at.error


def test_run_button_and_prepend_bos(odd_dir, odd):
    at = apptest("home", odd_dir, text="Hello there").run()
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
    at = apptest("compare", odd_dir, text=text).run()
    at.selectbox(key="cmp_stat").set_value("previous-token").run()
    assert not at.exception and at.session_state["cmp_open_for"] == "previous-token"
    # independently: the two heads with the highest previous-token score on this prompt
    ids = odd.encode(text)
    tr = run(odd.weights, ids, capture=["pattern"])
    scores = torch.stack([metrics.head_scores(tr["pattern", l][0], ids, window=odd.config.window(l))["previous-token"]
                          for l in range(odd.config.n_layers)])                  # [L, H]
    top = torch.argsort(scores.reshape(-1), descending=True)[:2].tolist()
    H = odd.config.n_heads
    assert list(at.session_state["cmp_open"]) == [compare.head_name(i // H, i % H) for i in top]


def test_compare_undefined_statistic_is_a_message_not_a_grid(odd_dir):
    at = apptest("compare", odd_dir, text="The animal didn't cross").run()
    at.selectbox(key="cmp_stat").set_value("duplicate-token").run()
    assert not at.exception
    assert any("undefined on this prompt" in i.value for i in at.info)


def test_a_link_to_a_local_folder_loads_it_only_after_confirmation(odd_dir, monkeypatch):
    import importlib

    sidebar = importlib.import_module("attnkit.app.sidebar")

    loaded = []
    real = sidebar.cached_model
    monkeypatch.setattr(sidebar, "cached_model", lambda name, dev: loaded.append(name) or real(name, dev))
    at = apptest("heatmaps", None, text="Some text here.")
    at.query_params["model"] = ui.LOCAL
    at.query_params["folder"] = str(odd_dir)
    at.run()
    assert not at.exception and not at.error and loaded == []
    assert any(str(odd_dir) in w.value for w in at.sidebar.warning)
    next(b for b in at.sidebar.button if b.label == "Load this folder").click().run()
    assert not at.exception and loaded == [str(odd_dir)]
    assert at.session_state["ak_model"] == ui.LOCAL and at.session_state["ak_folder"] == str(odd_dir)


def test_a_link_naming_a_system_path_as_the_model_loads_nothing(monkeypatch):
    import importlib

    sidebar = importlib.import_module("attnkit.app.sidebar")

    loaded = []
    real = sidebar.cached_model
    monkeypatch.setattr(sidebar, "cached_model", lambda name, dev: loaded.append(name) or real(name, dev))
    at = apptest("home", None, text="Some text here.")
    at.query_params["model"] = "/etc"
    at.run()
    assert not at.exception and loaded == []
    assert any("/etc" in w.value for w in at.sidebar.warning)
    q = at.query_params["folder"]
    assert (q[0] if isinstance(q, list) else q) == "/etc"            # the link stays as it came
    next(b for b in at.sidebar.button if b.label == "Ignore it").click().run()
    assert not at.exception and loaded and "/etc" not in loaded      # the default model instead
