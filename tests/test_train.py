"""attnkit.dev.train (train-default): end-to-end tiny run, HF loadability, exact tokenizer round-trips."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

import attnkit  # noqa: E402
from attnkit.cli.train_default import cli as train_cli  # noqa: E402
from attnkit.dev import train  # noqa: E402

SHIPPED = Path(attnkit.__file__).resolve().parent / "models" / "attnkit-tiny"
SAMPLES = [
    "Attention lets every token look at its context.",
    "注意力机制让每个词看见上下文",
    "🙂🚀",
    "mixed: def f(x):\n    return x  # 注意 🙂\n",
]

TINY_CORPUS = "\n\n".join(
    [
        "The quick brown fox jumps over the lazy dog.",
        "Attention is a weighted average of value vectors.",
        "def add(a, b):\n    return a + b",
        "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
        "Every token attends to the tokens before it.",
        "Emoji are bytes too 🙂🚀.",
    ]
    * 20
)


def assert_round_trips(tok) -> None:
    for text in SAMPLES:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids, clean_up_tokenization_spaces=False) == text, text


def check_folder(folder: Path) -> None:
    from transformers import AutoTokenizer, GPT2LMHeadModel

    assert (folder / "model.safetensors").is_file()
    assert not list(folder.glob("*.bin")) and not list(folder.glob("*.pt"))
    for name in ("config.json", "tokenizer.json", "vocab.json", "merges.txt",
                 "tokenizer_config.json", "MODEL_CARD.md"):
        assert (folder / name).is_file(), name
    model = GPT2LMHeadModel.from_pretrained(str(folder))
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert tok.is_fast
    assert "GPT2" in type(tok).__name__
    assert tok.eos_token == tok.bos_token == "<|endoftext|>"
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    assert model.config.eos_token_id == model.config.bos_token_id == eot
    assert model.config.vocab_size == len(tok)
    assert_round_trips(tok)
    import torch

    ids = torch.tensor([tok.encode(SAMPLES[0] + SAMPLES[1])[: model.config.n_positions]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], model.config.vocab_size)
    assert torch.isfinite(logits).all()
    assert "NOT OpenAI" in (folder / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_tiny_training_run_end_to_end(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    out = tmp_path / "model"
    import torch

    threads = torch.get_num_threads()
    rc = train_cli(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out), "--seed", "3", "--threads",
                    str(threads + 1)])
    assert rc == 0
    # the thread count changes float sums: training sets its own and puts the caller's back (it once left 1, and a
    # page's worker thread, with the default count, then summed differently from the main thread)
    assert torch.get_num_threads() == threads
    check_folder(out)
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "--steps 6" in card and "unigram" in card


def test_a_batch_with_no_scored_target_is_drawn_again(tmp_path, monkeypatch):
    """Every row's targets masked (first copies of random spans) has no loss (0/0 = NaN): the step draws again
    instead of stopping the run as diverged (seen at step 694 of a time-boxed run on a fast machine)."""
    import torch

    from attnkit.dev.train import loop

    real, calls = loop.sample_mixed_batch, []

    def first_empty(*a, **k):
        x, y, p = real(*a, **k)
        calls.append(1)
        return (x, torch.full_like(y, -100), p) if len(calls) == 1 else (x, y, p)

    monkeypatch.setattr(loop, "sample_mixed_batch", first_empty)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    out = tmp_path / "model"
    assert train_cli(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out)]) == 0
    assert len(calls) > 1
    check_folder(out)


def test_tiny_training_is_reproducible(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    from safetensors.torch import load_file

    weights = []
    for run in ("a", "b"):
        out = tmp_path / run
        assert train_cli(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out)]) == 0
        weights.append(load_file(str(out / "model.safetensors")))
    assert weights[0].keys() == weights[1].keys()
    for k in weights[0]:
        assert (weights[0][k] == weights[1][k]).all(), k


def test_unigram_baseline_and_lr_schedule():
    import torch

    train_ids = torch.tensor([0, 1, 1, 2])
    # counts + 1 = [2, 3, 2, 1] over 8 -> p(1) = 3/8
    ce = train.unigram_baseline(train_ids, torch.tensor([1]), vocab_size=4)
    assert ce == pytest.approx(-torch.log(torch.tensor(3 / 8)).item())
    assert train.lr_at(0, 100, 10, 1.0) == pytest.approx(0.1)
    assert train.lr_at(10, 100, 10, 1.0) == pytest.approx(1.0)
    assert train.lr_at(100, 100, 10, 1.0) == pytest.approx(0.1)


def test_wsd_schedule():
    assert train.lr_at(50, 100, 10, 1.0, schedule="wsd", decay_start=80) == pytest.approx(1.0)
    assert train.lr_at(90, 100, 10, 1.0, schedule="wsd", decay_start=80) == pytest.approx(0.55)
    assert train.lr_at(100, 100, 10, 1.0, schedule="wsd", decay_start=80) == pytest.approx(0.1)


@pytest.mark.slow
def test_time_boxed_run_is_reproduced_by_its_recorded_command(tmp_path):
    """--minutes picks the schedule from the clock; the card's command replays it exactly."""
    import shlex

    from safetensors.torch import load_file

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    flags = ["--corpus-file", str(corpus), "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
             "--n-positions", "16", "--vocab-size", "300", "--batch", "2", "--eval-every", "1000",
             "--warmup", "5"]
    first = tmp_path / "first"
    assert train_cli(flags + ["--out", str(first), "--minutes", "0.03"]) == 0
    card = (first / "MODEL_CARD.md").read_text(encoding="utf-8")
    cmd = next(line for line in card.splitlines() if line.startswith("python -m attnkit train-default"))
    argv = shlex.split(cmd)[4:]
    assert "--minutes" not in argv and "--schedule" in argv and "--decay-start" in argv
    second = tmp_path / "second"
    argv[argv.index("--out") + 1] = str(second)
    assert train_cli(argv) == 0
    a, b = load_file(str(first / "model.safetensors")), load_file(str(second / "model.safetensors"))
    assert all((a[k] == b[k]).all() for k in a)


def test_reproduce_argv_replaces_minutes():
    argv = ["--out", "x", "--minutes", "5", "--seed", "1"]
    assert train.reproduce_argv(argv, 42) == ["--out", "x", "--seed", "1", "--steps", "42"]
    assert train.reproduce_argv(argv + ["--stop-after", "7"], 42, 7) == [
        "--out", "x", "--seed", "1", "--steps", "42", "--stop-after", "7"]
    assert train.reproduce_argv(argv, 42, 42, "wsd", 30) == [
        "--out", "x", "--seed", "1", "--schedule", "wsd", "--decay-start", "30", "--steps", "42"]


@pytest.mark.skipif(not (SHIPPED / "model.safetensors").is_file(), reason="shipped model absent")
def test_shipped_model():
    check_folder(SHIPPED)
    total = sum(p.stat().st_size for p in SHIPPED.iterdir() if p.is_file())
    assert total <= 25 * 1024 * 1024


def test_second_stage_continues_the_first(tmp_path):
    import json

    from safetensors.torch import load_file

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    first, second = tmp_path / "s1", tmp_path / "s2"
    assert train_cli(["--tiny-test", "--corpus-file", str(corpus), "--out", str(first)]) == 0
    assert train_cli(["--tiny-test", "--corpus-file", str(corpus), "--out", str(second),
                      "--init-from", str(first)]) == 0
    log = json.loads((second / "training_log.json").read_text(encoding="utf-8"))
    assert len(log["stages"]) == 2 and log["tokens_seen"] == sum(s["tokens_seen"] for s in log["stages"])
    assert "--init-from" in log["stages"][1]["command"]
    assert "Trained in 2 stages" in (second / "MODEL_CARD.md").read_text(encoding="utf-8")
    w1, w2 = load_file(str(first / "model.safetensors")), load_file(str(second / "model.safetensors"))
    assert any(not (w1[k] == w2[k]).all() for k in w1)          # it trained further


def test_mixed_batch_rows():
    import torch

    ids = torch.arange(1000) % 97 + 1
    gen = torch.Generator().manual_seed(0)
    x, y, pos = train.sample_mixed_batch(ids, 64, 32, gen, vocab=50, p_text_rep=0.3, p_rand_rep=0.3, bos=0,
                                         p_shift=1.0, n_positions=64)
    assert x.shape == y.shape == (64, 32) and pos.shape == (64, 32)
    assert ((pos - pos[:, :1]) == torch.arange(32)).all() and pos.max() <= 63
    natural = (x[:, 1:] - x[:, :-1] == 1) | (x[:, 1:] == 1)      # consecutive ids of the stream
    kinds = {"natural": 0, "masked": 0}
    for r in range(64):
        if (y[r] == -100).any():                                  # random repeat: first copy not scored
            kinds["masked"] += 1
            scored = (y[r] != -100).nonzero()[0, 0]
            assert (y[r, :scored] == -100).all() and (y[r, scored:] != -100).all()
        elif natural[r].all():
            kinds["natural"] += 1
        assert (x[r, 1:] == y[r, :-1]).all() or (y[r] == -100).any()
    assert 0 < kinds["masked"] < 64 and 0 < kinds["natural"] < 64


@pytest.mark.slow
def test_time_boxed_long_phase_is_reproduced(tmp_path):
    """Short windows, then full-context ones from a step the time box picks; the card replays it."""
    import shlex

    from safetensors.torch import load_file

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    flags = ["--corpus-file", str(corpus), "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
             "--n-positions", "32", "--train-block", "8", "--vocab-size", "300", "--batch", "4",
             "--eval-every", "1000", "--warmup", "5", "--text-repeat", "0.25", "--random-repeat", "0.25",
             "--pos-shift", "0.5", "--long-frac", "0.9"]
    first = tmp_path / "first"
    assert train_cli(flags + ["--out", str(first), "--minutes", "0.05"]) == 0
    card = (first / "MODEL_CARD.md").read_text(encoding="utf-8")
    cmd = next(line for line in card.splitlines() if line.startswith("python -m attnkit train-default"))
    argv = shlex.split(cmd)[4:]
    assert "--long-start" in argv and "--minutes" not in argv and "--long-frac" not in argv
    assert "Training data mixture" in card and "bits/byte" in card
    second = tmp_path / "second"
    argv[argv.index("--out") + 1] = str(second)
    assert train_cli(argv) == 0
    a, b = load_file(str(first / "model.safetensors")), load_file(str(second / "model.safetensors"))
    assert all((a[k] == b[k]).all() for k in a)


def test_wordnet_lines():
    raw = ("  1 This software and database is being provided\n"
           "00001740 03 n 02 entity 0 thing 1 001 ~ 00001930 n 0000 | that which is perceived; "
           '"the animal crossed the street"\n'
           "00001741 03 n 01 being 0 000 | a definition without an example\n"
           "00001742 00 a 02 tired(p) 0 weary 0 000 | depleted of strength; \"tired mothers\"\n")
    assert train.wordnet_lines(raw) == [
        'entity, thing: that which is perceived; "the animal crossed the street"',
        'tired, weary: depleted of strength; "tired mothers"']


def test_sinusoid_positions_values():
    import math

    pe = train.sinusoid_positions(5, 4, std=0.02)
    s = 0.02 * math.sqrt(2)
    # dims (0, 1) at frequency 1, dims (2, 3) at frequency 10000^(-2/4) = 0.01
    assert abs(float(pe[3, 0]) - s * math.sin(3.0)) < 1e-7 and abs(float(pe[3, 1]) - s * math.cos(3.0)) < 1e-7
    assert abs(float(pe[4, 2]) - s * math.sin(0.04)) < 1e-7 and abs(float(pe[4, 3]) - s * math.cos(0.04)) < 1e-7
    assert abs(float(pe.pow(2).mean().sqrt()) - 0.02) < 1e-3          # GPT-2's per-dimension scale


def test_pos_init_is_used_and_recorded_through_stages_and_card_only_rewrites_the_card(tmp_path):
    import json

    from safetensors.torch import load_file

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    first, second = tmp_path / "s1", tmp_path / "s2"
    assert train_cli(["--tiny-test", "--corpus-file", str(corpus), "--out", str(first), "--pos-init", "sinusoid",
                      "--steps", "1", "--lr", "1e-9"]) == 0
    wpe = load_file(str(first / "model.safetensors"))["transformer.wpe.weight"]
    ref = train.sinusoid_positions(wpe.shape[0], wpe.shape[1])
    assert (wpe - ref).abs().max() < 1e-6                                  # one tiny step away from the codes
    assert train_cli(["--tiny-test", "--corpus-file", str(corpus), "--out", str(second),
                      "--init-from", str(first)]) == 0
    log = json.loads((second / "training_log.json").read_text(encoding="utf-8"))
    assert log["pos_init"] == "sinusoid"
    card = second / "MODEL_CARD.md"
    assert "initialised as sin/cos codes" in card.read_text(encoding="utf-8")
    card.write_text("stale", encoding="utf-8")
    assert train_cli(["--out", str(second), "--card-only"]) == 0
    text = card.read_text(encoding="utf-8")
    assert "Targets this model was trained for" in text and "| previous-token | ≥ 0.7 |" in text
    best = json.loads((second / "training_log.json").read_text(encoding="utf-8"))["best_heads"]
    assert f"{best['previous-token']['score']:.3f}" in text


def test_card_only_refuses_a_folder_without_a_training_log(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        train_cli(["--out", str(tmp_path), "--card-only"])
    assert e.value.code == 2 and "training_log.json" in capsys.readouterr().err   # bad input: exit 2, one line


def test_formation_text_counts_every_stage():
    info = {"batch": 16, "short_block": 128, "config": {"n_positions": 1024},
            "stages": [{"steps": 600}, {"steps": 900}],
            "history": [{"step": 1, "best_induction": 0.02}, {"step": 200, "best_induction": 0.05},
                        {"step": 400, "best_induction": 0.2}, {"step": 600, "best_induction": 0.7}]}
    text = train.formation_text(info)
    # 600 steps of stage 1 come first; 16 x 128 tokens a step
    assert "0.1 at step 1,000 (~2.0M tokens)" in text and "0.5 at step 1,200 (~2.5M tokens)" in text
    assert "below 0.1 up to step 800" in text
    info["history"] = [{"step": 1, "best_induction": 0.02}]
    assert train.formation_text(info) == ""
    # a later stage that opens with the head already formed: the stage where it formed says so, not this log
    first = train.formation_text({**info, "history": [{"step": 1, "best_induction": 0.02},
                                                      {"step": 300, "best_induction": 0.6}]})
    later = {**info, "stages": [{"steps": 600}, {"steps": 900, "formation": first}, {"steps": 500}],
             "history": [{"step": 1, "best_induction": 0.86}, {"step": 500, "best_induction": 0.9}]}
    text = train.formation_text(later)
    assert "at step 900" in text and text.endswith(", in stage 2; later stages kept it.")
    assert "step 1,501" not in text                  # not the later stage's first step
    # the next stage carries the text as it was recorded, and still names the stage where the head formed
    assert train.formation_text(later, record=True) == first
    carried = {**later, "stages": [*later["stages"][:2], {"steps": 500, "formation": first}, {"steps": 400}]}
    assert train.formation_text(carried) == text
