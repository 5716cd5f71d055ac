"""Audit 6(d): verify gives a verdict on a GPT-2 whose HF code cannot run its float64 reference as configured
(``reorder_and_upcast_attn: true``): the reference runs with the option off, and the report says so."""
from __future__ import annotations

from attnkit.cli import main
from helpers import make_checkpoint


def test_reorder_and_upcast_attn_gets_a_verdict(tmp_path, capsys):
    folder = make_checkpoint(tmp_path / "m", n_layer=2, n_head=2, n_embd=32, n_positions=64,
                             reorder_and_upcast_attn=True)
    rc = main(["verify", "--model", str(folder), "--generate", "2"])
    out = capsys.readouterr()
    assert rc == 0 and "PASS" in out.out and "Traceback" not in out.err
    assert "the float64 reference runs with reorder_and_upcast_attn off" in out.out
