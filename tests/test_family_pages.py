"""Every page works on the other families (or says why not): a grouped-query rotary model (Mistral's
layout with a sliding window) and a parallel-residual partial-rotary one (Pythia's)."""
import pytest

from attnkit.app.navigation import PAGES as PAGE_LIST
from helpers import apptest, make_family_checkpoint

PAGES = [spec.key for spec in PAGE_LIST]
TEXT = "The animal didn't cross the street because it was too tired, and the street was wide."


@pytest.fixture(scope="module")
def mistral_dir(tmp_path_factory):
    return make_family_checkpoint(tmp_path_factory.mktemp("mistral"), "mistral-window", hidden_size=128,
                                  intermediate_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=32)


@pytest.fixture(scope="module")
def pythia_dir(tmp_path_factory):
    return make_family_checkpoint(tmp_path_factory.mktemp("pythia"), "pythia-70m", hidden_size=128,
                                  intermediate_size=256, num_attention_heads=4)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_a_gqa_rotary_model(mistral_dir, page):
    at = apptest(page, mistral_dir, text=TEXT).run()
    assert not at.exception, page
    # the test tokenizer splits the example words into bytes: Head effects says an answer is not a single token,
    # Circuits the same (or that the pair no longer has equal lengths); each in one line
    expected = {"effects": ("single token",),
                "circuits": ("single token", "must be the same length")}
    errors = [e.value for e in at.error if not any(x in e.value for x in expected.get(page, ()))]
    assert not errors, (page, errors)


def test_step_page_shows_q_before_and_after_rotation_and_the_kv_head(mistral_dir, pythia_dir):
    at = apptest("steps", mistral_dir, text=TEXT, st_head=3).run()
    assert not at.exception and not at.error
    captions = " ".join(c.value for c in at.caption)
    assert "Rotary position embedding" in captions and "reads key/value head 1" in captions
    at = apptest("steps", pythia_dir, text=TEXT).run()
    assert not at.exception and not at.error
    assert any("Rotary position embedding" in c.value for c in at.caption)


def test_ablations_page_says_why_w_k_equals_w_q_is_unavailable_under_gqa(mistral_dir):
    at = apptest("ablations", mistral_dir, text=TEXT).run()
    assert not at.exception
    assert any("Not available on this model" in c.value for c in at.caption)
