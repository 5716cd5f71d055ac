"""Copied planted folders are not trusted (issue 44, class 16): CIRCUIT.json and MODEL_CARD.md each have one reader
(attnkit.planted_files) that types every field and refuses anything else in one line naming the file and the field;
a circuit naming heads the model lacks says which; a FIFO card cannot hang Home; Home and Circuits show one line,
never Streamlit's exception box."""
from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

from attnkit import examples as EX
from attnkit import planted_files as pf
from attnkit.app.language import SESSION_KEY as LANG
from attnkit.i18n import language
from attnkit.loading import SHIPPED, load
from helpers import apptest

INDUCTION = "planted-induction"
HOME, CIRCUITS = "home", "circuits"
GOOD = json.loads((SHIPPED[INDUCTION] / pf.CIRCUIT_FILE).read_text(encoding="utf-8"))


@pytest.fixture()
def copy(tmp_path):
    """A copy of the shipped planted-induction folder, to spoil."""
    return shutil.copytree(SHIPPED[INDUCTION], tmp_path / "planted")


def _write(folder, data) -> None:
    (folder / pf.CIRCUIT_FILE).write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("change,words", [
    ({"edges": ["L0H0 -> L1H0.k"]}, ["edges[0] must be an object with \"sender\" and \"receiver\"", "L0H0 -> L1H0.k"]),
    ({"edges": []}, ["edges must be a non-empty list"]),
    ({"heads": {"L0H0": 1}}, ["heads must be a non-empty list"]),
    ({"heads": ["L0H0", "attention"]}, ["heads[1] must be a head name such as L1H0", '"attention"']),
    ({"heads": ["L0H0", "L０H1"]}, ["heads[1] must be a head name"]),
    ({"heads": ["L0H0", 3]}, ["heads[1] must be a head name", "got 3"]),
    ({"heads": ["L0H0", "L0H0"]}, ["heads[1] repeats L0H0"]),
    ({"edges": [{"sender": "logits", "receiver": "L1H0.k"}]}, ["edges[0].sender must be embed, L{l}H{h} or MLP{l}"]),
    ({"edges": [{"sender": "L0H0", "receiver": "L1H0"}]}, ["edges[0].receiver must be L{l}H{h}.q/.k/.v"]),
    ({"edges": [{"sender": "L0H0"}]}, ["edges[0].receiver must be", "got null"]),
    ({"edges": [{"sender": "L0H0", "receiver": "L1H0.k"}] * 2}, ["edges[1] repeats L0H0 → L1H0.k"]),
    ({"roles": {"L7H0": "induction"}}, ["roles names \"L7H0\", which is not in heads"]),
    ({"roles": ["induction"]}, ["roles must be an object head -> role"]),
    ({"task": "copy"}, ["task must be one of induction, successor", '"copy"']),
    ({"shift": "7"}, ["shift must be a whole number", '"7"']),
    ({"vocab": 5}, ["vocab must be a whole number ≥ 16", "got 5"]),
    ({"metric": 3}, ["metric must be text"]),
])
def test_a_malformed_circuit_is_one_line_naming_the_file_and_the_field(copy, change, words):
    _write(copy, {**GOOD, **change})
    with pytest.raises(pf.FileError) as e:
        pf.read_circuit(copy)
    text = str(e.value)
    assert "\n" not in text and str(copy / pf.CIRCUIT_FILE) in text and all(w in text for w in words), text


def test_the_reader_types_and_names_everything(copy):
    _write(copy, {**GOOD, "heads": ["l0h0", " L1H0 "], "edges": [{"sender": "L0H0", "receiver": "l1h0.k"}]})
    c = pf.read_circuit(copy)
    assert c.heads == ("L0H0", "L1H0") and c.edges == (("L0H0", "L1H0.k"),)     # one spelling (attnkit.standard)
    assert (c.task, c.shift, c.vocab) == ("induction", 0, 40) and c.roles == GOOD["roles"]
    _write(copy, "[1, 2")
    with pytest.raises(pf.FileError, match="not valid JSON"):
        pf.read_circuit(copy)


def test_heads_and_mlps_the_model_lacks_are_named(copy):
    cfg = load(INDUCTION, "cpu").config
    _write(copy, {**GOOD, "heads": ["L0H0", "L5H0"], "roles": {},
                  "edges": [{"sender": "L0H0", "receiver": f"L1H{cfg.n_heads}.k"}, {"sender": "MLP9", "receiver": "logits"}]})
    assert pf.read_circuit(copy).heads == ("L0H0", "L5H0")                       # without a model: syntax only
    with pytest.raises(pf.FileError) as e:
        pf.read_circuit(copy, cfg)
    text = str(e.value)
    assert f"names L5H0, L1H{cfg.n_heads}.k, MLP9, which this model lacks" in text
    assert f"layers 0…{cfg.n_layers - 1} and heads 0…{cfg.n_heads - 1}" in text
    with language("zh"):
        assert "这个模型没有" in str(e.value)
    _write(copy, {**GOOD, "vocab": cfg.d_vocab + 1})
    with pytest.raises(pf.FileError, match="larger than the model's vocabulary"):
        pf.read_circuit(copy, cfg)


def test_a_fifo_card_or_circuit_is_refused_at_once(copy):
    for name in (pf.CARD_FILE, pf.CIRCUIT_FILE):
        (copy / name).unlink()
        os.mkfifo(copy / name)
    out = {}
    th = threading.Thread(target=lambda: out.update(
        card=_error(pf.read_card, copy), circuit=_error(pf.read_circuit, copy)), daemon=True)
    th.start()
    th.join(20)
    assert not th.is_alive(), "a FIFO was opened for reading"
    assert "MODEL_CARD.md is a FIFO" in out["card"] and "CIRCUIT.json is a FIFO" in out["circuit"]
    assert pf.planted_folder(copy) == copy                  # still a planted folder: its reader says what is wrong


def _error(fn, *args) -> str:
    try:
        fn(*args)
    except pf.FileError as e:
        return str(e)
    return ""


def _home(folder, **state):
    at = apptest(HOME, folder, **state)
    at.run()
    assert not at.exception, at.exception
    return at


def test_home_with_a_fifo_card_shows_the_circuit_and_one_line(copy):
    (copy / pf.CARD_FILE).unlink()
    os.mkfifo(copy / pf.CARD_FILE)
    at = _home(copy)
    errors = [e.value.replace("\\", "") for e in at.error]     # as shown: escaped, not Markdown
    assert len(errors) == 1 and "MODEL_CARD.md is a FIFO" in errors[0], errors
    assert any(s.value.startswith("Planted circuit") for s in at.subheader)       # the circuit is still shown


@pytest.mark.parametrize("bad", ['{"heads": 3, "edges": "x"}', '{"heads": ["L0H0"], "edges": [["L0H0", "L1H0.k"]]}',
                                 "not json", "[]"])
def test_home_with_a_malformed_circuit_says_so_in_one_line(copy, bad):
    _write(copy, bad)
    at = _home(copy)
    errors = [e.value.replace("\\", "") for e in at.error]     # as shown: escaped, not Markdown
    assert len(errors) == 1 and "CIRCUIT.json" in errors[0], errors
    assert not any(s.value.startswith("Planted circuit") for s in at.subheader)


def test_home_says_it_in_chinese(copy):
    _write(copy, {**GOOD, "heads": ["L0H0", "L9H0"], "roles": {}})
    at = _home(copy, **{LANG: "zh"})
    errors = [e.value.replace("\\", "") for e in at.error]     # as shown: escaped, not Markdown
    assert len(errors) == 1 and "L9H0" in errors[0] and "这个模型没有" in errors[0], errors


def test_circuits_with_edges_as_strings_or_heads_it_lacks_is_one_line(copy):
    _write(copy, {**GOOD, "edges": ["L0H0->L1H0.k"]})
    pair = EX.texts("Repeated random tokens (planted induction)")    # a copied folder is not offered it by name
    at = apptest(CIRCUITS, copy, timeout=600, ci_example="Your own", **{f"ci_{f}": pair[f] for f in EX.FIELDS})
    at.run()
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "") for e in at.error]     # as shown: escaped, not Markdown
    assert len(errors) == 1 and "edges[0] must be an object" in errors[0], errors
    assert not [m for m in at.metric if m.label == "Stated edges found"]        # nothing compared
    _write(copy, {**GOOD, "heads": ["L0H0", "L1H9"], "roles": {}})
    at.run()
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "") for e in at.error]     # as shown: escaped, not Markdown
    assert len(errors) == 1 and "names L1H9, which this model lacks" in errors[0], errors
