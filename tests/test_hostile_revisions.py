"""Class 1 of the fourth hostile round: a revision is a branch, tag or commit name, never a path; a file the
loader reads (config.json, the tokenizer's files) may not link outside the model folder."""
from __future__ import annotations

import os

import pytest

from attnkit.loading import LoadError, check_revision, load, split_revision
from attnkit.cli import main
from helpers import make_checkpoint

BAD = ["../../../../etc/passwd", "/etc/passwd", "main/../../x", "a..b", ".hidden", "x\ny", "x\x00y", "tab\there",
       "a b", "refs//heads", "trailing/", "x.lock", "\\windows", "~root", "x" * 201, "ré"]
GOOD = ["main", "step1000", "v1.0", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567", "release-2_x+1"]


@pytest.mark.parametrize("rev", BAD)
def test_bad_revisions_are_refused_in_one_line(rev):
    with pytest.raises(LoadError) as e:
        split_revision(f"EleutherAI/pythia-70m@{rev}")
    assert "\n" not in str(e.value) and "not a branch, tag or commit name" in str(e.value)


@pytest.mark.parametrize("rev", GOOD)
def test_branch_tag_and_commit_names_pass(rev):
    assert split_revision(f"EleutherAI/pythia-70m@{rev}") == ("EleutherAI/pythia-70m", rev)
    assert check_revision(rev) == rev


def test_cli_refuses_a_path_revision_before_any_work(capsys):
    rc = main(["verify", "--model", "gpt2@../../../../etc/hostname", "--generate", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "not a branch, tag or commit name" in err


def test_link_model_with_a_path_revision_counts_as_local():
    from attnkit.app.url import is_local     # links: a bad revision needs the local-folder confirmation

    assert is_local("gpt2@../../../../tmp/x")


def test_config_json_linking_outside_the_folder_is_refused(tmp_path):
    folder = make_checkpoint(tmp_path / "m", n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=400)
    outside = tmp_path / "elsewhere.json"
    os.replace(folder / "config.json", outside)
    os.symlink(outside, folder / "config.json")
    with pytest.raises(LoadError) as e:
        load(str(folder), "cpu")
    assert "links outside its folder" in str(e.value) and "\n" not in str(e.value)
    # a link inside the folder is fine
    os.unlink(folder / "config.json")
    os.replace(outside, folder / "real-config.json")
    os.symlink("real-config.json", folder / "config.json")
    assert load(str(folder), "cpu").config.n_layers == 1
