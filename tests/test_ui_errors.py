"""Errors in the dashboard (issue 9): wrong models, devices and uploads give messages, and the session keeps
its state."""
import json
import time

import pytest
import torch

from attnkit.app.navigation import PAGES
from helpers import apptest


def messages(at):
    return [e.value for e in at.error] + [w.value for w in at.warning] + [i.value for i in at.info]


def test_pickle_only_folder_explained(tmp_path, odd):
    folder = tmp_path / "pickled"
    odd.hf_model.config.save_pretrained(folder)
    torch.save(odd.hf_model.state_dict(), folder / "pytorch_model.bin")
    at = apptest("home", folder).run()
    assert not at.exception
    assert any("pickled" in m and "safetensors only" in m for m in messages(at))


def test_bert_folder_explained(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    at = apptest("home", tmp_path).run()
    assert not at.exception and any("'bert' model" in m and "supports: gpt2" in m for m in messages(at))


def test_hub_name_offline_explained_quickly():
    t0 = time.perf_counter()
    at = apptest("home", None, ak_model="gpt2-large").run()
    assert time.perf_counter() - t0 < 20
    assert not at.exception
    assert any("gpt2-large" in m and ("HF_HUB_OFFLINE" in m or "cannot be reached" in m) for m in messages(at))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_requested_without_cuda_runs_on_cpu(odd_dir):
    at = apptest("home", odd_dir, ak_device="cuda").run()
    assert not at.exception
    assert any("not available" in m and "CPU" in m for m in messages(at))
    assert any("tokens" in m.value for m in at.markdown)      # and the page still works


def test_bad_upload_keeps_the_typed_prompt(odd_dir):
    at = apptest("home", odd_dir, text="my careful prompt").run()
    at.radio(key="ak_source").set_value("Upload")
    at.session_state["ak_upload_data"] = ("notes.txt", b"\xff\xfe\x00\x00binary")
    at.run()
    assert not at.exception and any("binary" in m or "UTF-8" in m for m in messages(at))
    at.radio(key="ak_source").set_value("Type").run()
    assert not at.exception
    assert at.text_area(key="ak_text").value == "my careful prompt"


def test_long_prompt_truncation_is_stated(odd_dir):
    at = apptest("home", odd_dir, text="attention " * 400).run()     # the odd model has 256 positions
    assert not at.exception
    assert any("tokens were dropped" in m and "256" in m for m in messages(at))


def test_script_tags_are_text(odd_dir):
    at = apptest("home", odd_dir, text="<script>alert('x')</script><b>bold</b>").run()
    assert not at.exception
    for md in at.markdown:                      # never injected into Markdown/HTML …
        assert "<script>" not in md.value
    shown = "".join(at.dataframe[2].value["token"])   # … but shown literally in the token table
    assert "<script>alert('x')</script><b>bold</b>" in shown


def test_every_page_survives_a_one_token_prompt(odd_dir, odd):
    assert len(odd.encode("Hi")) == 1 or len(odd.encode("H")) == 1
    text = "Hi" if len(odd.encode("Hi")) == 1 else "H"
    for page in [spec.key for spec in PAGES]:
        at = apptest(page, odd_dir, text=text).run()
        assert not at.exception, (page, at.exception)
        for e in at.error:
            assert "could not be computed" not in e.value, (page, e.value)
