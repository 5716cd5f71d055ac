"""Hostile input, round three (issue 27), classes 2–4:

2. code in a model folder never runs: a folder naming custom code is refused in one line before
   transformers reads it, and no "[y/N]" question is ever asked, with or without a terminal;
3. real HuggingFace caches load: sharded snapshots whose files link into ``../../blobs``, and
   ``NAME@REVISION`` checked against that revision's snapshot (two widths, one per revision);
4. a config attnkit cannot compute exactly is refused at load in one line naming the field; one it
   accepts it computes equal to HF.
"""
import builtins
import json
import math
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from attnkit import checkpoint
from attnkit.loading import LoadError, load
from attnkit.verify import compare_generation
from helpers import cache_repo, make_checkpoint, make_family_checkpoint, make_tokenizer
from test_families import assert_equal_to_hf, random_ids

ROOT = Path(__file__).resolve().parents[1]


class _Delete:
    def __repr__(self):
        return "DELETE"


DELETE = _Delete()

#: each family at a small width (the per-layer layout of the real shape, 64 wide)
SMALL = {
    "llama": ("smollm2-135m", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=16)),
    "mistral": ("mistral-window", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                       num_key_value_heads=2, head_dim=16, sliding_window=4)),
    "neox": ("pythia-70m", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4)),
    "neo": ("gpt-neo-125m", dict(hidden_size=64, intermediate_size=128, num_heads=4)),
}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """family -> a small random checkpoint folder of it, each built once."""
    built = {}

    def get(family):
        if family not in built:
            folder = tmp_path_factory.mktemp(family)
            if family == "gpt2":
                make_checkpoint(folder, n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=400,
                                bos_token_id=0, eos_token_id=0)
            else:
                shape, kw = SMALL[family]
                make_family_checkpoint(folder, shape, **kw)
            built[family] = folder
        return built[family]

    return get


def edited(src: Path, dst: Path, file: str = "config.json", **changes) -> Path:
    """A copy of the checkpoint ``src`` whose JSON ``file`` has ``changes`` (``a.b`` sets a nested key;
    DELETE removes one; NaN and ±Infinity are written as JSON's NaN / Infinity)."""
    shutil.copytree(src, dst)
    data = json.loads((dst / file).read_text())
    for key, value in changes.items():
        *path, last = key.split(".")
        node = data
        for p in path:
            node = node[p]
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    (dst / file).write_text(json.dumps(data, allow_nan=True))
    return dst


def one_line(msg: str) -> str:
    assert msg and "\n" not in msg.strip() and "Traceback" not in msg, msg
    return msg


# ----------------------------------------------------------------------------- 2. code never runs

EVIL_PY = """import pathlib
pathlib.Path({marker!r}).write_text("custom code ran")
from transformers import GPT2TokenizerFast, GPT2Config, GPT2LMHeadModel
class EvilTokenizer(GPT2TokenizerFast):
    pass
class EvilConfig(GPT2Config):
    pass
class EvilModel(GPT2LMHeadModel):
    pass
"""

CUSTOM_CODE = [
    ("tokenizer_config.json", {"auto_map": {"AutoTokenizer": ["evil.EvilTokenizer", "evil.EvilTokenizer"]},
                               "tokenizer_class": "EvilTokenizer"}, "auto_map in tokenizer_config.json"),
    ("tokenizer_config.json", {"tokenizer_class": "EvilTokenizer"}, "tokenizer_class 'EvilTokenizer'"),
    ("config.json", {"auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}},
     "auto_map in config.json"),
    ("config.json", {"trust_remote_code": True}, "trust_remote_code in config.json"),
]


def evil_folder(base, tmp_path, file, changes) -> tuple[Path, Path]:
    marker = tmp_path / "marker.txt"
    folder = edited(base("gpt2"), tmp_path / "evil", file, **changes)
    (folder / "evil.py").write_text(EVIL_PY.format(marker=str(marker)))
    return folder, marker


@pytest.fixture
def no_questions(monkeypatch):
    """input() answers "y", as a user at a terminal might; every question asked is recorded."""
    asked = []
    monkeypatch.setattr(builtins, "input", lambda prompt="": asked.append(prompt) or "y")
    return asked


@pytest.mark.parametrize("file,changes,what", CUSTOM_CODE, ids=[w for _, _, w in CUSTOM_CODE])
def test_folder_naming_custom_code_is_refused_in_one_line(base, tmp_path, no_questions, file, changes, what):
    folder, marker = evil_folder(base, tmp_path, file, changes)
    with pytest.raises(LoadError) as e:
        load(str(folder), "cpu")
    msg = one_line(str(e.value))
    assert f"names custom code ({what}" in msg and msg.endswith("attnkit never runs code from a model folder"), msg
    assert not marker.exists() and no_questions == []


def test_the_evil_folder_runs_its_code_when_trusted(base, tmp_path):
    """The fixture is live: a program that does trust it (not attnkit) runs evil.py and the marker appears."""
    folder, marker = evil_folder(base, tmp_path, *CUSTOM_CODE[0][:2])
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    code = ("import sys; from transformers import AutoTokenizer; "
            "AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)")
    r = subprocess.run([sys.executable, "-c", code, str(folder)], env=env, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and marker.exists(), r.stderr[-1500:]


@pytest.mark.parametrize("file,changes,what", CUSTOM_CODE[::2], ids=[w for _, _, w in CUSTOM_CODE[::2]])
def test_without_the_precheck_transformers_is_still_told_no(base, tmp_path, no_questions, monkeypatch,
                                                             file, changes, what):
    """Every transformers call gets trust_remote_code=False: even if the folder check missed something,
    nothing is asked and nothing runs."""
    monkeypatch.setattr(checkpoint, "custom_code", lambda folder: None)
    folder, marker = evil_folder(base, tmp_path, file, changes)
    try:
        load(str(folder), "cpu")
    except LoadError as e:
        one_line(str(e))
    assert not marker.exists() and no_questions == []


def test_hub_model_naming_custom_code_is_refused_before_transformers_reads_it(base, tmp_path, monkeypatch):
    """A hub model not yet cached: its config.json and tokenizer_config.json (of the revision asked for)
    are fetched first and checked; transformers is never reached."""
    import huggingface_hub
    from transformers import AutoConfig

    from attnkit import loading

    folder, marker = evil_folder(base, tmp_path, *CUSTOM_CODE[0][:2])
    fetched = []
    monkeypatch.setattr(loading, "_cached", lambda repo, revision=None: False)
    monkeypatch.setattr(loading, "_offline", lambda: False)
    monkeypatch.setattr(loading, "hub_available", lambda repo, timeout=3.0: True)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download",
                        lambda repo, f, revision=None: fetched.append((f, revision)))
    monkeypatch.setattr(checkpoint, "snapshot_folder", lambda repo, revision=None: folder if fetched else None)
    monkeypatch.setattr(AutoConfig, "from_pretrained", lambda *a, **k: pytest.fail("transformers read the folder"))
    with pytest.raises(LoadError) as e:
        load("owner/evil@v2", "cpu")
    assert "'owner/evil@v2' names custom code (auto_map in tokenizer_config.json)" in one_line(str(e.value))
    assert fetched == [("config.json", "v2"), ("tokenizer_config.json", "v2")] and not marker.exists()


def test_transformers_refusing_custom_code_reads_as_the_same_line(base, monkeypatch):
    """Should transformers itself refuse (its ValueError about trust_remote_code), the user gets attnkit's line."""
    from transformers import AutoConfig

    def refuse(*a, **k):
        raise ValueError("The repository x contains custom code which must be executed to correctly load the "
                         "model.\nPlease pass the argument `trust_remote_code=True` to allow custom code to be run.")

    monkeypatch.setattr(AutoConfig, "from_pretrained", refuse)
    with pytest.raises(LoadError) as e:
        load(str(base("gpt2")), "cpu")
    assert one_line(str(e.value)).endswith("names custom code (transformers asked for trust_remote_code); "
                                           "attnkit never runs code from a model folder")


def test_every_transformers_call_in_the_loaders_refuses_remote_code():
    """The calls in loading.py and checkpoint.py that can import code (from_pretrained, from_config)
    all pass trust_remote_code=False (directly or via checkpoint.NO_CODE)."""
    import ast

    for name in ("loading.py", "checkpoint.py"):
        tree = ast.parse((ROOT / "attnkit" / name).read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in {"from_pretrained", "from_config"}]
        assert calls, name
        for c in calls:
            kws = {k.arg for k in c.keywords}
            starred = [ast.unparse(k.value) for k in c.keywords if k.arg is None]
            assert "trust_remote_code" in kws or any("NO_CODE" in s or s == "kwargs" for s in starred), \
                f"{name}:{c.lineno} {ast.unparse(c)[:80]}"
    assert checkpoint.NO_CODE == {"trust_remote_code": False}


def _run_on_a_terminal(argv, answer: bytes, timeout: float = 180) -> tuple[int, str]:
    """Run ``argv`` with stdin, stdout and stderr on a pseudo-terminal, ``answer`` typed ahead."""
    master, slave = pty.openpty()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env, close_fds=True)
    os.close(slave)
    os.write(master, answer)
    out, end = b"", time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:            # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    rc = p.wait(timeout=10)
    return rc, out.decode("utf-8", "replace")


def test_cli_on_a_terminal_answering_yes_runs_nothing(base, tmp_path):
    folder, marker = evil_folder(base, tmp_path, *CUSTOM_CODE[0][:2])
    rc, out = _run_on_a_terminal([sys.executable, "-m", "attnkit", "heads", "--model", str(folder)], b"y\n")
    lines = [l for l in out.replace("\r", "").splitlines() if l.strip() and l.strip() != "y"]
    assert rc == 2 and len(lines) == 1, out
    assert "names custom code (auto_map in tokenizer_config.json)" in lines[0] and "[y/N]" not in out, out
    assert not marker.exists()


# ----------------------------------------------------------------------------- 3. HuggingFace caches

@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory):
    """A cache with owner/tiny: main is 64 wide in shards (max_shard_size), step1 is 32 wide in one file."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tmp = tmp_path_factory.mktemp("hfcache")
    wide, narrow = tmp / "wide", tmp / "narrow"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=400)).save_pretrained(
        wide, max_shard_size="150KB")
    make_checkpoint(narrow, seed=1, n_layer=2, n_embd=32, n_head=2, n_positions=64, vocab_size=400)
    make_tokenizer(wide)
    hub = tmp / "home" / "hub"
    commits = cache_repo(hub, "owner/tiny", {"main": wide, "step1": narrow})
    assert len(list(wide.glob("model-*.safetensors"))) >= 3      # really sharded
    return hub, commits


def test_cache_snapshot_shards_link_into_blobs_and_are_read(hf_cache):
    hub, commits = hf_cache
    snap = hub / "models--owner--tiny" / "snapshots" / commits["main"]
    files = checkpoint.weight_files(snap)
    assert len(files) >= 3 and all(f.is_symlink() and "blobs" in os.readlink(f) for f in files)
    assert checkpoint.read_header(files[0])


def test_cache_link_escaping_the_repository_is_refused(hf_cache, tmp_path):
    hub, commits = hf_cache
    root = hub / "models--owner--tiny"
    snap = root / "snapshots" / ("e" * 40)
    shutil.copytree(root / "snapshots" / commits["main"], snap, symlinks=True)
    index = json.loads((snap / checkpoint.INDEX_FILE).read_text())
    first = sorted(set(index["weight_map"].values()))[0]
    outside = tmp_path / "elsewhere.safetensors"
    shutil.copy(snap / first, outside)
    (snap / first).unlink()
    (snap / first).symlink_to(outside)
    with pytest.raises(checkpoint.CheckpointError, match="points outside its folder"):
        checkpoint.weight_files(snap)


LOAD_FROM_CACHE = """
import json, sys
from attnkit.loading import load
from attnkit.verify import compare
import torch
out = {}
for name in sys.argv[1:]:
    m = load(name, "cpu")
    rep = compare(m.hf_model, m.weights, torch.randint(0, 400, (20,), generator=torch.Generator().manual_seed(0)))
    out[name] = [m.config.d_model, m.source, rep.ok, m.hf_model.transformer.wte.weight.shape[1]]
print(json.dumps(out))
"""


def test_cached_model_and_its_revisions_load(hf_cache):
    """As a researcher with the hub has them: HF_HOME with the cache, offline; main (sharded, 64 wide),
    @step1 (a branch, 32 wide) and @<commit> each checked against their own snapshot."""
    hub, commits = hf_cache
    env = {**os.environ, "HF_HOME": str(hub.parent), "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    names = ["owner/tiny", "owner/tiny@step1", f"owner/tiny@{commits['step1']}", "owner/tiny@main"]
    r = subprocess.run([sys.executable, "-c", LOAD_FROM_CACHE, *names], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert [got[n][0] for n in names] == [64, 32, 32, 64]
    assert all(got[n][2] and got[n][3] == got[n][0] for n in names), got    # equal to HF, built at that width


# ----------------------------------------------------------------------------- 4. configs

NAN, INF = float("nan"), float("inf")
REFUSED = [
    ("llama", {"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
    ("llama", {"rope_parameters": {"rope_theta": 1e5, "rope_type": "linear", "factor": 0.0}}, "factor"),
    ("llama", {"rope_parameters": {"rope_theta": 1e5, "rope_type": "llama3", "factor": -2.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 256}}, "factor"),
    ("llama", {"rope_parameters.rope_theta": 0.0}, "rope_theta"),
    ("llama", {"rope_parameters.rope_theta": -10000.0}, "rope_theta"),
    ("llama", {"rope_parameters.rope_theta": NAN}, "rope_theta"),
    ("llama", {"rms_norm_eps": INF}, "rms_norm_eps"),
    ("llama", {"num_hidden_layers": 0}, "num_hidden_layers"),
    ("llama", {"num_attention_heads": 0}, "num_attention_heads"),
    ("llama", {"num_attention_heads": 3, "head_dim": DELETE}, "num_attention_heads"),   # 3 ∤ 64
    ("llama", {"num_key_value_heads": 3}, "num_key_value_heads"),                      # 3 ∤ 4
    ("llama", {"num_key_value_heads": 0}, "num_key_value_heads"),
    ("llama", {"head_dim": 15}, "head_dim"),
    ("llama", {"rms_norm_eps": -1e-5}, "rms_norm_eps"),
    ("mistral", {"sliding_window": 0}, "sliding_window"),
    ("mistral", {"sliding_window": -4}, "sliding_window"),
    ("mistral", {"sliding_window": 1}, "sliding_window"),
    ("neox", {"rope_parameters.partial_rotary_factor": 1.5}, "rotary_pct"),
    ("neox", {"rope_parameters": {"rope_theta": 10000, "rope_type": "default"}, "rotary_pct": 1.5}, "rotary_pct"),
    ("neox", {"rope_parameters.partial_rotary_factor": -0.25}, "rotary_pct"),
    ("neox", {"rope_parameters.rope_theta": 0}, "rope_theta"),
    ("neox", {"hidden_size": 60, "rope_parameters.partial_rotary_factor": 1.0}, "rotary_pct"),   # 16 dims of 15
    ("neox", {"num_hidden_layers": 0}, "num_hidden_layers"),
    ("neox", {"num_attention_heads": 0}, "num_attention_heads"),
    ("neox", {"num_attention_heads": 5}, "num_attention_heads"),
    ("neo", {"window_size": 0}, "window_size"),
    ("neo", {"window_size": -1}, "window_size"),
    ("neo", {"num_heads": 0}, "num_heads"),
    ("neo", {"num_layers": 0, "attention_layers": [], "attention_types": []}, "num_layers"),
    ("gpt2", {"n_layer": 0}, "n_layer"),
    ("gpt2", {"n_head": 0}, "n_head"),
    ("gpt2", {"n_head": 5}, "n_head"),
    ("gpt2", {"layer_norm_epsilon": NAN}, "layer_norm_epsilon"),
    ("gpt2", {"layer_norm_epsilon": -1e-5}, "layer_norm_epsilon"),
    ("neox", {"layer_norm_eps": -1.0}, "layer_norm_eps"),
]


@pytest.mark.parametrize("family,changes,field", REFUSED,
                         ids=[f"{f}-{','.join(f'{k}={v}' for k, v in c.items())[:60]}" for f, c, _ in REFUSED])
def test_config_attnkit_cannot_compute_is_refused_naming_the_field(base, tmp_path, capsys, family, changes, field):
    from attnkit.cli import main

    folder = edited(base(family), tmp_path / "m", **changes)
    capsys.readouterr()                       # (building the base checkpoint may have written progress)
    with pytest.raises(LoadError) as e:
        load(str(folder), "cpu")
    msg = one_line(str(e.value))
    assert re.search(rf"config field ([\w.]+\.)?{field}=", msg), msg
    assert main(["heads", "--model", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err


def test_window_1_of_hfs_sliding_cache_really_differs(base, tmp_path):
    """Why Mistral/Qwen2's window 1 is refused: HF's own cached generation then differs from its forward
    pass (its sliding-window cache keeps w − 1 = 0 keys), so no implementation can equal both."""
    shape, kw = SMALL["mistral"]
    folder = make_family_checkpoint(tmp_path / "w1", shape, tokenizer=False, **{**kw, "sliding_window": 1})
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    ids = random_ids(12)[None]
    with torch.no_grad():
        gen = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False,
                          pad_token_id=0, eos_token_id=None)
        full = hf(gen).logits[0, ids.shape[1] - 1:-1].argmax(-1)
    assert gen[0, ids.shape[1]:].tolist() != full.tolist()


ACCEPTED = [
    ("neox", dict(rotary_pct=0.0), False),                  # no rotary dims: HF rotates nothing
    ("neox", dict(hidden_size=128, num_attention_heads=2, rotary_pct=0.3), False),   # 19 of 64 dims: odd
    ("neo", dict(window_size=1), True),                     # a local layer sees only itself
    ("mistral", dict(sliding_window=2), True),              # the smallest window HF's cache keeps right
    ("llama", dict(rope_scaling={"rope_type": "linear", "factor": 0.5}), False),     # HF warns, computes
]


@pytest.mark.parametrize("family,overrides,generate", ACCEPTED, ids=[f"{f}-{o}" for f, o, _ in ACCEPTED])
def test_accepted_edge_configs_equal_hf(tmp_path, family, overrides, generate):
    shape, kw = SMALL[family]
    m = load(str(make_family_checkpoint(tmp_path / "m", shape, **{**kw, **overrides})), "cpu")
    assert_equal_to_hf(m, 24, seed=2)
    if generate:
        g = compare_generation(m.hf_model, m.weights, random_ids(20, seed=4), n_new=8)
        assert g.ok and g.tokens == g.hf_tokens, g.line()
    if "rotary_pct" in overrides:      # 0 → nothing rotates; 0.3 of 64 → 19 → 10 frequencies turning 20 dims
        assert m.config.rotary_dim == 2 * m.weights.inv_freq.numel() == {0.0: 0, 0.3: 20}[overrides["rotary_pct"]]


def test_qwen2_window_is_checked_only_where_qwen2_reads_it():
    """Qwen2 ignores sliding_window unless use_sliding_window (HF sets it to None), so 0 there is no error."""
    from attnkit.families import UnsupportedModel, checks, family_for

    qwen2 = dict(model_type="qwen2", num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 hidden_size=64, sliding_window=0)
    family_for("qwen2").validate(checks.raw(qwen2))
    with pytest.raises(UnsupportedModel, match="sliding_window=0"):
        family_for("qwen2").validate(checks.raw({**qwen2, "use_sliding_window": True}))
    with pytest.raises(UnsupportedModel, match="sliding_window=1"):
        family_for("qwen2").validate(checks.raw({**qwen2, "use_sliding_window": True, "sliding_window": 1}))


def test_validate_is_each_familys_hook():
    """One place per family: every registered family overrides validate (the checks it shares live in
    attnkit/families/checks.py)."""
    from attnkit.families import FAMILIES, Family

    assert FAMILIES and all(type(f).validate is not Family.validate for f in FAMILIES.values())
    assert math.isnan(NAN)
