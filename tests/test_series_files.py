"""Hostile series folders (issue 44, classes 14, 16, 19): series.json read by its one reader (attnkit.series.read_index)
— every field typed, every bad value refused in one line naming the file and the field, in the reader's language —,
paths it names kept inside the folder, files read only when they are regular files, step numbers in ASCII digits,
each once and in training order."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from attnkit import files
from attnkit import series as series_mod
from attnkit.cli import main
from attnkit.i18n import language


def _folder(root: Path, steps=(0, 100)) -> Path:
    """Empty step folders (the reader's checks run before any checkpoint is read)."""
    for s in steps:
        (root / f"step-{s:06d}").mkdir(parents=True)
    return root


def _index(root: Path, data) -> Path:
    (root / series_mod.SERIES_FILE).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return root


def _refused(root: Path, *words: str) -> str:
    with pytest.raises(series_mod.SeriesError) as e:
        series_mod.resolve(str(root))
    text = str(e.value)
    assert "\n" not in text and all(w in text for w in words), text
    return text


def _zh(err_fn) -> str:
    with pytest.raises(series_mod.SeriesError) as e:
        err_fn()
    with language("zh"):
        return str(e.value)


ROW = {"folder": "step-000000", "step": 0}


@pytest.mark.parametrize("row,field,words", [
    ({"folder": "step-000000", "step": "abc"}, "checkpoints[0].step", ["is text", "without quotes"]),
    ({"folder": "step-000000", "step": "１００"}, "checkpoints[0].step", ["digits 0-9 (ASCII)"]),
    ({"folder": "step-000000", "step": "1,5"}, "checkpoints[0].step", ["decimal comma"]),
    ({"folder": "step-000000", "step": 1.5}, "checkpoints[0].step", ["whole number ≥ 0", "got 1.5"]),
    ({"folder": "step-000000", "step": -1}, "checkpoints[0].step", ["whole number ≥ 0"]),
    ({"folder": "step-000000", "step": True}, "checkpoints[0].step", ["whole number ≥ 0", "got true"]),
    ({"folder": ["step-000000"]}, "checkpoints[0].folder", ["step folder's name", '["step-000000"]']),
    ({"folder": "../step-000000"}, "checkpoints[0].folder", ["step folder's name"]),
    ({"folder": "step-000000", "val_loss": "5,3"}, "checkpoints[0].val_loss", ["decimal comma", "5.3"]),
    ({"folder": "step-000000", "val_loss": "x"}, "checkpoints[0].val_loss", ["finite number or null"]),
    ({"folder": "step-000000", "tokens_seen": "2,048"}, "checkpoints[0].tokens_seen", ["decimal comma"]),
    ({"folder": "step-000000", "note": [1, 2]}, "checkpoints[0].note", ["a number, text, true/false or null"]),
    ("step-000000", "checkpoints[0]", ["an object"]),
])
def test_a_bad_checkpoint_row_is_one_line_naming_the_file_and_the_field(tmp_path, row, field, words):
    root = _index(_folder(tmp_path / "s"), {"checkpoints": [row]})
    _refused(root, str(root / "series.json"), field, *words)


@pytest.mark.parametrize("data,words", [
    ([1, 2], ["must be an object"]),
    ({"checkpoints": {"a": 1}}, ["checkpoints must be a list"]),
    ({"checkpoints": [ROW, {"folder": "step-000100", "step": 0}]}, ["checkpoints[1] repeats step 0 of checkpoints[0]"]),
    ({"checkpoints": [{"folder": "step-000100"}, ROW]}, ["checkpoints[1] has step 0, below the 100 of checkpoints[0]"]),
    ({"checkpoints": [ROW, ROW]}, ["checkpoints[1] lists step-000000 again"]),
    ({"train_block": 5}, ["train_block must be a whole number ≥ 20"]),
    ({"train_block": "128"}, ["train_block = \"128\" is text"]),
    ({"about": ["x"]}, ["about must be text"]),
    ({"texts": 7}, ["texts must be a relative path"]),
])
def test_a_bad_index_is_one_line_and_says_which_is_bad(tmp_path, data, words):
    _refused(_index(_folder(tmp_path / "s"), data), *words)


def test_series_json_that_is_not_json_says_where(tmp_path):
    root = _folder(tmp_path / "s")
    (root / "series.json").write_text('{"checkpoints": [\n  {"folder": "step-000000",}\n]}', encoding="utf-8")
    _refused(root, "not valid JSON (line 2, column")
    (root / "series.json").write_text('{"checkpoints": [], "train_block": NaN}', encoding="utf-8")
    _refused(root, "NaN is not a JSON value")
    (root / "series.json").write_text("[" * 100_000, encoding="utf-8")
    _refused(root, "not valid JSON")
    (root / "series.json").write_bytes(b'{"about": "\xff"}')
    _refused(root, "not UTF-8 text (byte 0xFF at offset 11)")


@pytest.mark.parametrize("name,words", [("../outside.txt", ["points outside its folder"]),
                                        ("/etc/hostname", ["points outside its folder"]),
                                        ("~/x.txt", ["points outside its folder"]),
                                        ("sub/../../outside.txt", ["points outside its folder"]),
                                        ("link.txt", ["leads out of its folder through a link"]),
                                        ("absent.txt", ["is not a file in the series folder"])])
def test_texts_must_stay_inside_the_series_folder(tmp_path, name, words):
    (tmp_path / "outside.txt").write_text("secret text outside the series", encoding="utf-8")
    root = _folder(tmp_path / "s")
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    _refused(_index(root, {"texts": name}), "series.json: texts", *words)


def test_texts_inside_through_a_link_inside_is_read(tmp_path):
    root = _folder(tmp_path / "s")
    (root / "texts").mkdir()
    (root / "texts" / "eval.txt").write_text("an evaluation text", encoding="utf-8")
    (root / "eval.txt").symlink_to(root / "texts" / "eval.txt")
    s = series_mod.resolve(str(_index(root, {"texts": "eval.txt"})))
    assert series_mod.read_texts(s) == "an evaluation text"


def _returns_within(fn, seconds: float = 20.0):
    """Run ``fn`` in a thread; fail (instead of hanging the suite) when it has not returned in time."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn()
        except Exception as e:                      # noqa: BLE001 - handed back to the test
            out["error"] = e

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), "hung (a FIFO was opened for reading)"
    return out


def test_fifos_are_refused_not_read(tmp_path):
    root = _folder(tmp_path / "s")
    os.mkfifo(root / "eval.txt")
    got = _returns_within(lambda: series_mod.resolve(str(_index(root, {"texts": "eval.txt"}))))
    assert "is a FIFO, not a regular file" in str(got["error"])
    (root / "series.json").unlink()
    os.mkfifo(root / "series.json")
    got = _returns_within(lambda: series_mod.resolve(str(root)))
    assert isinstance(got["error"], series_mod.SeriesError) and "series.json is a FIFO" in str(got["error"])


def test_a_fifo_config_or_tokenizer_file_in_a_step_folder_is_refused(tmp_path):
    root = _folder(tmp_path / "s")
    for step in ("step-000000", "step-000100"):
        (root / step / "config.json").write_text('{"n_layer": 1}', encoding="utf-8")
        (root / step / "tokenizer.json").write_text("{}", encoding="utf-8")
    s = series_mod.resolve(str(root))
    series_mod.check_consistent(s)
    (root / "step-000100" / "tokenizer.json").unlink()
    os.mkfifo(root / "step-000100" / "tokenizer.json")
    got = _returns_within(lambda: series_mod.check_consistent(s))
    assert isinstance(got["error"], series_mod.SeriesError) and "tokenizer.json is a FIFO" in str(got["error"])
    (root / "step-000000" / "config.json").unlink()
    os.mkfifo(root / "step-000000" / "config.json")
    got = _returns_within(lambda: series_mod.check_consistent(s))
    assert "config.json is a FIFO" in str(got["error"])


def test_step_folders_are_ascii_digits_each_step_once_and_inside(tmp_path):
    root = _folder(tmp_path / "a", (0,))
    (root / "step-１００").mkdir()
    _refused(root, "step-１００ is not a step folder's name", "digits 0-9 (ASCII)")
    root = _folder(tmp_path / "b", (0,))
    (root / "step-100").mkdir()
    (root / "step-000100").mkdir()
    _refused(root, "step-000100 and step-100 are both step 100")
    root = _folder(tmp_path / "c", (0,))
    (tmp_path / "elsewhere").mkdir()
    (root / "step-000100").symlink_to(tmp_path / "elsewhere")
    _refused(root, "step-000100", "leads out of its folder through a link")


def test_hub_revisions_in_other_digits_are_refused():
    with pytest.raises(series_mod.SeriesError, match="digits other than 0-9"):
        series_mod.resolve("someone/absent@step０,step１０")
    with pytest.raises(series_mod.SeriesError, match="ASCII digits"):
        series_mod.resolve("someone/absent@step0..step１０/３")


def test_series_errors_are_in_chinese_in_a_chinese_call(tmp_path):
    root = _index(_folder(tmp_path / "s"), {"checkpoints": [{"folder": "step-000000", "step": "１００"}]})
    zh = _zh(lambda: series_mod.resolve(str(root)))
    assert "请使用 ASCII 数字 0-9" in zh and "checkpoints[0].step" in zh and str(root) in zh
    assert "找不到序列文件夹" in _zh(lambda: series_mod.resolve(str(tmp_path / "nowhere")))
    assert "出现了两次" in _zh(lambda: series_mod.resolve("o/n@step0,step0"))


def test_the_training_cli_says_it_in_one_line_in_either_language(tmp_path, capsys):
    root = _index(_folder(tmp_path / "s"), {"checkpoints": [{"folder": "step-000000", "step": "1,5"}]})
    assert main(["training", "--series", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnkit training: ") and "decimal comma" in err and "\n" not in err
    assert main(["training", "--lang", "zh", "--series", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert "小数逗号" in err and "\n" not in err


def test_files_readers_refuse_devices_big_files_and_folders(tmp_path):
    with pytest.raises(files.FileError, match="is a device, not a regular file"):
        files.read_bytes("/dev/zero", 10)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2000)
    with pytest.raises(files.FileError, match="larger than"):
        files.read_json(big, 1000)
    with pytest.raises(files.FileError, match="is a folder"):
        files.read_text(tmp_path, 1000)
    assert files.read_json(big.with_name("ok.json").write_text("[1]") and big.with_name("ok.json"), 10) == [1]
