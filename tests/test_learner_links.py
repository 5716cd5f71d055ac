"""Round five, what a learner met around the pages: a shared Heatmaps link keeps the why panel's query and key; a
prompt of unknown tokens is said in one line above the page; the Training page opens on the head its verdict names,
names its series (not a path), offers only pages that run on a model, and steps or plays through the checkpoints
(those in tests/test_training_page.py, beside its analysed series)."""
import re

import pytest

from attnkit.app.pages.heatmaps import why as why_view
from helpers import apptest

TEXT = "Install the kernel source and the module binary. Install the kernel"


def test_a_heatmaps_link_keeps_the_why_query_and_key():
    at = apptest("heatmaps", text=TEXT)
    at.query_params.update({"layer": "3", "head": "0", "why_q": "11", "why_k": "3"})
    at.run()
    assert not at.exception, at.exception
    assert (at.session_state[why_view.Q_KEY], at.session_state[why_view.K_KEY]) == (11, 3)
    assert at.metric, "the panel's split is shown"
    link = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert (link["why_q"], link["why_k"]) == ("11", "3")            # written back: copying the link keeps them
    fresh = apptest("heatmaps", text=TEXT).run()                    # nothing picked: nothing in the link
    assert "why_q" not in fresh.query_params and fresh.session_state[why_view.Q_KEY] is None


def _unknown(at) -> list[str]:
    shown = [w.value.replace("\\", "") for w in at.main.warning]          # plain() escapes < and >
    return [w for w in shown if "<unk>" in w]


@pytest.mark.parametrize("page", ["home", "heatmaps"])
def test_a_prompt_of_unknown_tokens_is_said_in_one_line(page):
    at = apptest(page, ak_model="planted-induction", ak_text="The animal didn't cross the street.").run()
    assert not at.exception, at.exception
    (line,) = _unknown(at)
    assert "The whole prompt became <unk>" in line and "planted-induction" in line and "\n" not in line
    mixed = apptest(page, ak_model="planted-induction", ak_text="t1 t2 hello t3").run()
    assert _unknown(mixed) == ["1 of the prompt's 4 tokens are <unk>: planted-induction's tokenizer does not know "
                               "those words, so the model sees nothing of them."]
    assert not _unknown(apptest(page, ak_model="planted-induction", ak_text="t1 t2 t3").run())
    assert not _unknown(apptest(page, text="The animal didn't cross the street.").run())   # byte-level: never


def test_the_library_counts_unknown_tokens_only_for_a_tokenizer_that_has_them():
    from attnkit.loading import load

    planted, tiny = load("planted-induction", "cpu"), load("attnkit-tiny", "cpu")
    ids = planted.encode("t1 hello t2 world")
    assert planted.unknown_share(ids) == 0.5 and planted.unk_id == 40
    assert tiny.unk_id is None and tiny.unknown_share([0, 0, 5]) == 0.0    # GPT-2's "unk" is end-of-text
