"""The Atlas page (attnkit/app/pages/atlas/): an atlas run on the sidebar's model as a job (its estimate said before a
button starts it, kept on disk so the next session reads it at once), the scatter, a head's card with its verdicts
(planted-decoys: the real heads "pattern and effect", the decoys "pattern only"), a link that reopens a head's card
(after the confirmation a link's local path asks for), an atlas folder whose model differs from the sidebar's, the
job's Stop, and the page in 简体中文. The corpus is small: each atlas costs seconds."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from attnkit.app.context import DEFAULT_PROMPT
from attnkit.app.pages.atlas.source import SLOT
from attnkit.app.language import SESSION_KEY
from attnkit.corpus import CorpusError, atlas_cache, load_atlas
from attnkit.loading import SHIPPED
from helpers import apptest
from test_atlas import _words_corpus
from untranslated import apptest_texts, untranslated

PAGE = "atlas"
MODEL = "planted-decoys"
CIRCUIT = json.loads((SHIPPED[MODEL] / "CIRCUIT.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def words(tmp_path_factory) -> Path:
    return _words_corpus(tmp_path_factory.mktemp("words"), n_docs=6, seed=11)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    folder = tmp_path_factory.mktemp("cache")
    mp.setenv("ATTNKIT_CACHE", str(folder))
    mp.setenv("ATTNKIT_JOB_WAIT", "600")              # AppTest cannot poll: a run waits for its job
    yield folder
    mp.undo()


def _open(corpus, **state):
    return apptest(PAGE, ak_model=MODEL, timeout=600, **{"at_corpus": str(corpus), "at_docs": 6, **state})


def _start(at):
    return next(b for b in at.button if str(b.label).startswith(("Start the atlas", "开始"))).click().run()


def _verdict_rows(at) -> list[dict]:
    table = next(d.value for d in at.dataframe if "verdict" in d.value.columns or "结论" in d.value.columns)
    return table.to_dict("records")


def _card_of(at) -> str:
    return next(s.value for s in at.subheader if s.value.startswith(("Head L", "注意力头 L"))).split()[-1]


@pytest.fixture(scope="module")
def ran(cache, words):
    """The page's first session: the estimate, then Start; the atlas computed once for the module."""
    at = _open(words).run()
    assert not at.exception, at.exception
    before = " ".join(c.value for c in at.caption)
    assert "6 documents" in before and "Estimated" in before and not at.get("vega_lite_chart")[:-1]
    return _start(at)


def test_a_run_shows_the_scatter_and_the_card_of_the_strongest_head(ran):
    at = ran
    assert not at.exception, at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert any(s.get("params", [{}])[0].get("name") == "pick" for s in specs)          # the scatter, clickable
    assert any("A pattern is not a role" in i.value for i in at.info)
    head = _card_of(at)
    assert head == at.session_state["at_head"]
    prev, ind = CIRCUIT["heads"]
    at.selectbox(key="at_head").set_value(prev).run()
    rows = {r["role"]: r["verdict"] for r in _verdict_rows(at)}
    assert rows["previous-token"] == "pattern and effect" and _card_of(at) == prev
    decoy = next(h for h, d in CIRCUIT["decoys"].items() if d["effect"] == "none")
    at.selectbox(key="at_head").set_value(decoy).run()
    rows = {r["role"]: r["verdict"] for r in _verdict_rows(at)}
    assert rows[CIRCUIT["decoys"][decoy]["pattern"]] == "pattern only"
    assert any("inert on this corpus" in i.value for i in at.info)
    examples = "\n".join(x.value for x in at.text)
    assert "«" in examples and "⟦" in examples                        # the query and the attended keys marked


def test_a_second_session_reads_the_atlas_at_once_and_the_buttons_open_the_other_pages(ran, words):
    at = _open(words).run()
    assert not at.exception and not [b for b in at.button if str(b.label).startswith("Start the atlas")]
    df = load_atlas(_folder_of()).to_pandas()
    assert _card_of(at) == df.loc[df["effect"].idxmax(), "head"]                # the largest effect, at first
    ind = CIRCUIT["heads"][1]
    at.selectbox(key="at_head").set_value(ind).run()
    at.button(key="at_open_circuits").click().run()
    assert not at.exception, at.exception
    assert (at.session_state["ci_recv_layer"], at.session_state["ci_recv_head"]) == (1, 0) == tuple(
        int(x) for x in ind[1:].split("H"))


def test_a_link_to_a_head_reopens_its_card_after_confirming_the_corpus(ran, words):
    decoy = next(iter(CIRCUIT["decoys"]))
    at = apptest(PAGE, ak_model=MODEL, timeout=600)
    at.query_params.update(corpus=str(words), docs="6", head=decoy)
    at.run()
    assert not at.exception and any("Nothing is loaded until you confirm" in w.value for w in at.warning)
    assert not at.get("vega_lite_chart")[:-1]                           # nothing read before the click
    next(b for b in at.button if b.label == "Load this folder").click().run()
    assert not at.exception, at.exception
    assert _card_of(at) == decoy == at.session_state["at_head"]


def test_an_atlas_folder_of_another_model_says_so(ran, tmp_path):
    folder = _folder_of()
    at = apptest(PAGE, ak_model="planted-induction", at_source="folder", at_folder=str(folder), timeout=600).run()
    assert not at.exception, at.exception
    assert any("they differ" in w.value for w in at.warning)
    assert _card_of(at)                                                 # drawn as it is
    at = apptest(PAGE, ak_model="planted-induction", at_source="folder", at_folder=str(tmp_path), timeout=600).run()
    assert not at.exception and len(at.error) == 1 and "could not read the atlas folder" in at.error[0].value


def _folder_of() -> Path:
    """A finished atlas folder in the module's cache (planted-decoys over the words)."""
    return next(p.parent for p in atlas_cache.atlas_folder("x").parent.glob("*/manifest.json")
                if atlas_cache.complete(p.parent))


def test_stop_ends_the_run_and_a_new_start_resumes_it(cache, words, monkeypatch):
    real = atlas_cache.run_atlas

    def slow(*args, progress=None, **kw):          # each progress call lasts 5 s, asking for Stop every 0.1 s
        def tick(done, total):
            for _ in range(50):
                time.sleep(0.1)
                progress(done, total)
        return real(*args, progress=tick, **kw)

    monkeypatch.setattr(atlas_cache, "run_atlas", slow)
    monkeypatch.setenv("ATTNKIT_JOB_WAIT", "0")
    at = _start(_open(words, at_docs=5).run())
    assert not at.exception, at.exception
    job = at.session_state["_ak_jobs"][SLOT]
    assert job.alive
    at.button(key=f"_ak_stop_{SLOT}").click().run()
    assert not at.exception, at.exception
    assert job.state == "stopped" and any("stopped after" in i.value for i in at.info)
    folder = Path(job.key)
    assert not atlas_cache.complete(folder) and (folder / "manifest.json").exists()     # kept, to resume
    monkeypatch.setattr(atlas_cache, "run_atlas", real)
    monkeypatch.setenv("ATTNKIT_JOB_WAIT", "600")
    next(b for b in at.button if str(b.label).startswith("Run again")).click().run()
    assert not at.exception, at.exception
    assert atlas_cache.complete(folder) and _card_of(at)


def test_the_page_in_chinese(ran, words):
    at = _open(words, **{SESSION_KEY: "zh"}).run()
    assert not at.exception, at.exception
    texts = apptest_texts(at)
    assert any("模式不等于作用" in s for s in texts), texts[:30]
    examples = [x.value for x in at.text]
    assert untranslated(texts, allow=[str(words), DEFAULT_PROMPT, *examples]) == []


def test_a_run_that_fails_at_once_is_one_line(cache, words, monkeypatch):
    def fail(*args, **kw):
        raise CorpusError("no document could be read")

    monkeypatch.setattr(atlas_cache, "cached_atlas", fail)
    at = _start(_open(words, at_docs=4).run())
    assert not at.exception, at.exception
    assert len(at.error) == 1 and "CorpusError: no document could be read" in at.error[0].value
    assert [b for b in at.button if str(b.label).startswith("Start the atlas")]      # drawn once, to try again


def test_the_bundle_zip_holds_the_files_a_reader_opens_and_not_the_work_folder(ran):
    import io
    import zipfile

    from attnkit.app.exports import zip_bytes

    folder = _folder_of()
    names = zipfile.ZipFile(io.BytesIO(zip_bytes(folder, skip=("work",), root="atlas-x"))).namelist()
    heads = [h.name for h in (folder / "heads").glob("*.json")]
    assert sorted(names) == sorted(["atlas-x/atlas.html", "atlas-x/index.json", "atlas-x/manifest.json",
                                    *[f"atlas-x/heads/{h}" for h in heads]]) and len(heads) == 8


def test_why_opens_heatmaps_on_the_head_with_its_top_example_as_the_prompt(ran, words):
    from attnkit.app.pages.atlas.card import example_prompt
    from attnkit.loading import load

    ind = CIRCUIT["heads"][1]
    at = _open(words, at_head=ind).run()
    assert _card_of(at) == ind
    at.button(key="at_open_why").click().run()
    assert not at.exception, at.exception
    top = next(d["examples"][0] for d in load_atlas(_folder_of()).card(ind)["deciles"] if d["examples"])
    m = load(MODEL, "cpu")
    prompt = at.session_state["ak_text"]
    assert prompt == example_prompt(top, m) and m.token_texts(m.encode(prompt)) == top["pieces"]   # the same tokens
    assert (at.session_state["hm_view"], at.session_state["hm_layer"], at.session_state["hm_head"]) == \
        ("One head", *(int(x) for x in ind[1:].split("H")))
