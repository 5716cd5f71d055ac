"""Commands on edge cases: heads on a zero-layer model is one line; long commands (and per-position
patching) report progress on stderr.
"""
from attnkit.cli import main
from hostile import only_line


def test_heads_on_a_zero_layer_model_is_one_line(tmp_path, capsys):
    from helpers import make_checkpoint

    d = make_checkpoint(tmp_path / "zero", n_layer=0, n_head=2, n_embd=16, n_positions=32, vocab_size=100,
                        bos_token_id=0, eos_token_id=0)
    rc = main(["heads", "--model", str(d)])
    err = capsys.readouterr().err
    assert rc == 2 and "n_layer=0" in only_line(err, "attnkit heads:")


def test_long_commands_report_progress_on_stderr(capsys):
    """Class 8: a long CLI run (per-position patching at hundreds of tokens) says how far it is and what is
    left; a short one prints nothing."""
    import io

    from attnkit.cli.progress import Ticker

    quiet = io.StringIO()
    t = Ticker("attnkit patch", "patched runs", stream=quiet)          # default: silent for the first 2 s
    t(1, 10), t(10, 10)
    assert quiet.getvalue() == ""
    out = io.StringIO()
    t = Ticker("attnkit patch", "patched runs", stream=out, after=0, every=0)
    t(250, 1000), t(1000, 1000)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("attnkit patch: 250/1,000 patched runs · ") and "left" in lines[0]
    assert lines[1].startswith("attnkit patch: 1,000/1,000 patched runs") and "left" not in lines[1]


def test_patch_cli_passes_its_progress_to_the_library(monkeypatch, capsys):
    from attnkit.cli import patch as patch_cli
    from attnkit.cli.progress import Ticker

    seen = {}
    real = patch_cli.patch

    def spy(*a, **k):
        seen["progress"] = k.get("progress")
        return real(*a, **k)

    monkeypatch.setattr(patch_cli, "patch", spy)
    rc = patch_cli.cli(["--model", "attnkit-tiny", "--clean", "Install the kernel source. Install the kernel",
                        "--corrupt", "Install the kernel binary. Install the kernel", "--answer", " source",
                        "--distractor", " binary"])
    assert rc == 0 and isinstance(seen["progress"], Ticker)
