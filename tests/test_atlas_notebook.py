"""The head atlas in a notebook (``Model.atlas``): on planted-decoys the real heads hold their roles by pattern and
effect and the decoys by pattern only, through the API; the atlas is kept on disk (asked again, it is read, not
computed), and ``save("x.html")`` writes the atlas's own offline file."""
from __future__ import annotations

import json

import pytest

import attnkit
from attnkit.atlas_result import LOWERS, NO_EFFECT, PATTERN_AND_EFFECT, PATTERN_ONLY
from attnkit.loading import SHIPPED
from test_atlas import _words_corpus


@pytest.fixture(scope="module")
def decoy_atlas(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNKIT_CACHE", str(tmp_path_factory.mktemp("cache")))
    corpus = _words_corpus(tmp_path_factory.mktemp("words"), n_docs=8, seed=5)
    m = attnkit.load("planted-decoys")
    calls = []
    yield m, corpus, m.atlas(corpus, progress=lambda done, total: calls.append((done, total))), calls
    mp.undo()


def test_the_api_labels_the_real_heads_and_the_decoys(decoy_atlas):
    _, _, a, calls = decoy_atlas
    circuit = json.loads((SHIPPED["planted-decoys"] / "CIRCUIT.json").read_text(encoding="utf-8"))
    prev, ind = circuit["heads"]
    assert a.verdicts(prev)["previous-token"] == PATTERN_AND_EFFECT
    assert a.verdicts(ind)["induction"] == PATTERN_AND_EFFECT
    for head, d in circuit["decoys"].items():
        assert a.verdicts(head)[d["pattern"]] == PATTERN_ONLY, head
        assert a.card(head)["effect"]["direction"] == (LOWERS if d["effect"] == "negative" else NO_EFFECT), head
    df = a.to_pandas()
    assert list(df["head"]) == [h["head"] for h in a.result.heads] and len(df) == 2 * 4
    assert df.set_index("head").loc[prev, "verdict: previous-token"] == PATTERN_AND_EFFECT
    assert calls and calls[-1][0] == calls[-1][1] == 2 * 8            # documents over both passes
    assert f"{prev} previous-token" in a.summary() and "pattern only" in a.summary()


class Ran(Exception):
    """Raised by the stand-in for a run: the atlas was about to be computed."""


def test_asked_again_it_is_read_from_the_cache(decoy_atlas, monkeypatch):
    m, corpus, a, _ = decoy_atlas
    from attnkit.corpus import atlas_cache

    def stub(corpus, folder, *args, **kw):
        raise Ran(str(folder))

    monkeypatch.setattr(atlas_cache, "run_atlas", stub)
    again = m.atlas(corpus)                                      # read: nothing computed
    assert again.folder == a.folder and again.to_pandas().equals(a.to_pandas())
    zh = attnkit.load("planted-decoys", lang="zh").atlas(corpus)  # the same atlas, its summary in Chinese
    assert zh.folder == a.folder and "注意力头图谱" in zh.summary()
    with pytest.raises(Ran) as e:                                 # other settings: another atlas, computed
        m.atlas(corpus, max_docs=4)
    assert str(e.value) != str(a.folder)


def test_save_writes_the_offline_atlas_file_and_the_chart(decoy_atlas, tmp_path):
    _, _, a, _ = decoy_atlas
    page = a.save(tmp_path / "atlas.html")
    assert page.read_bytes() == (a.folder / "atlas.html").read_bytes()
    text = page.read_text(encoding="utf-8")
    assert "Content-Security-Policy" in text and all(f'"head": "{h["head"]}"' in text for h in a.result.heads)
    spec = a.chart("previous-token", "induction", "layer").to_dict()
    assert spec["encoding"]["color"]["field"] == "layer"
    a.save(tmp_path / "heads.csv")
    assert (tmp_path / "heads.csv").read_text(encoding="utf-8").startswith("head,layer,index,")
