"""Issue 42, item 3: a job keeps its session's language (and the rest of the session's context). A message
rendered in the job's worker thread — a failed job's one-line error included — comes out in the language of
the session that started it, not in the worker thread's default (English)."""
from __future__ import annotations

import contextvars
import json

import pytest

from attnkit import i18n, training
from attnkit.app import jobs as J
from attnkit.app.language import SESSION_KEY
from attnkit.i18n import msg
from helpers import apptest, make_checkpoint

NO_TOKENS = "the prompt has no tokens: nothing to predict from"
NO_TOKENS_ZH = "提示中没有 token：无从预测"           # its entry in attnkit/locale/zh_CN/…/attnkit.po
SESSION_TAG: contextvars.ContextVar[str] = contextvars.ContextVar("session_tag", default="none")


def _failing(progress):
    raise ValueError(msg(NO_TOKENS))


def _run(lang: str, fn) -> J.Job:
    with i18n.language(lang):
        j = J.Job(("k", lang), "job", fn).start()
    j.join(30)
    return j


@pytest.mark.parametrize("lang, text", [("zh", NO_TOKENS_ZH), ("en", NO_TOKENS)])
def test_a_failed_jobs_one_line_error_is_in_the_sessions_language(lang, text):
    j = _run(lang, _failing)
    assert j.state == "failed" and j.error == f"ValueError: {text}"


def test_a_job_sees_its_sessions_language_and_context_not_the_language_set_after_it_started():
    token = SESSION_TAG.set("session 7")
    try:
        with i18n.language("zh"):
            j = J.Job("k", "job", lambda progress: (i18n.current(), SESSION_TAG.get(), str(msg(NO_TOKENS))))
        j.start().join(30)                  # started under English: what counts is the context it was made in
    finally:
        SESSION_TAG.reset(token)
    assert j.state == "done" and j.result == ("zh", "session 7", NO_TOKENS_ZH)
    assert i18n.current() == "en"           # the caller's own context is untouched


def test_a_failing_training_job_in_a_chinese_session_shows_its_error_in_chinese(monkeypatch, tmp_path):
    """The Training page's analysis job fails (its library call raises a catalogued message): the page, in a
    简体中文 session, shows the one-line error in Chinese, inside the Chinese "… failed after …" line. (A series
    of its own: a result another test computed for the shipped series would be shared, and shown.)"""
    folder = tmp_path / "steps"
    make_checkpoint(folder / "step-000000", n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=500,
                    bos_token_id=0, eos_token_id=0)
    (folder / "series.json").write_text(json.dumps({"checkpoints": [{"step": 0, "folder": "step-000000"}]}))
    monkeypatch.setattr(training, "analyse", lambda *a, **k: _failing(None))
    at = apptest("training", timeout=120, tr_series=str(folder), **{SESSION_KEY: "zh"}).run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert NO_TOKENS_ZH in errors[0] and "失败" in errors[0] and NO_TOKENS not in errors[0], errors
