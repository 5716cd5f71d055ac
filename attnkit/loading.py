"""Loading checkpoints of every supported family (GPT-2, Llama/Qwen2/Mistral, GPT-NeoX/Pythia, GPT-Neo;
:mod:`attnkit.families`): hub names, local folders, the shipped default.

Always: HuggingFace's ``AutoModelForCausalLM`` for the checkpoint's ``model_type`` (refused, before
transformers reads it, when attnkit has no family for it), with eager attention (so its own attention
weights can be compared with ours), float32, eval mode, safetensors only — a folder holding only a pickled
``pytorch_model.bin`` is refused, since unpickling runs arbitrary code. Nor does any other code from a model
folder run: one whose config or tokenizer config names custom code is refused before transformers reads it,
and every transformers call is given ``trust_remote_code=False`` (so transformers never asks "run the
custom code? [y/N]").

transformers and huggingface_hub are imported inside the functions that load (here and in
:mod:`attnkit.checkpoint`): importing them takes longer than torch itself, and every page and command
imports this module for :class:`LoadError` and the model names without loading anything.

Every failure raises :class:`LoadError` with a one-line message meant for the user.
"""
from __future__ import annotations

import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from . import checkpoint
from .families import FAMILIES, UnsupportedModel, checks, family_for
from .pieces import Group, char_groups, token_texts
from .weights import Weights, extract
from .i18n import Message, join, msg

__all__ = [
    "LoadError",
    "Loaded",
    "HUB_NAMES",
    "SHIPPED",
    "DEFAULT_HUB_MODEL",
    "SHIPPED_MODEL",
    "PLANTED_MODELS",
    "CHINESE_MODEL",
    "MODEL_CHOICES",
    "load",
    "resolve_device",
    "default_model",
    "hub_available",
    "load_for_cli",
    "locate",
    "FAMILY_MODELS",
    "split_revision",
    "check_revision",
    "missing_shipped",
]

SHIPPED_MODEL = "attnkit-tiny"
DEFAULT_HUB_MODEL = "gpt2"
#: Short names of the shipped checkpoints -> folders inside the package.
SHIPPED = {SHIPPED_MODEL: Path(__file__).parent / "models" / SHIPPED_MODEL}
#: Planted-circuit models (hand-set weights, a CIRCUIT.json each; built by attnkit/dev/planted.py).
PLANTED_MODELS = ["planted-induction", "planted-llama", "planted-mlp", "planted-competing", "planted-decoys"]
SHIPPED.update({n: Path(__file__).parent / "models" / n for n in PLANTED_MODELS})
#: the shipped model that reads Chinese (trained like attnkit-tiny on Chinese and English Debian text)
CHINESE_MODEL = "attnkit-tiny-zh"
SHIPPED[CHINESE_MODEL] = Path(__file__).parent / "models" / CHINESE_MODEL
#: GPT-2 family short names -> hub repositories.
HUB_NAMES = {
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large",
    "gpt2-xl": "openai-community/gpt2-xl",
    "distilgpt2": "distilbert/distilgpt2",
}
#: Other families: a short list of hub names each (their Family.examples), offered by the model picker.
def _family_models() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for fam in FAMILIES.values():
        if fam.name != "gpt2" and fam.name not in out:
            out[fam.name] = list(fam.examples)
    return out


FAMILY_MODELS = _family_models()
MODEL_CHOICES = [SHIPPED_MODEL, CHINESE_MODEL, *PLANTED_MODELS, *HUB_NAMES, *(n for names in FAMILY_MODELS.values() for n in names)]


def training_tokens(name: str) -> int | None:
    """The number of tokens a shipped model was trained on (its ``training_log.json``), None when not known."""
    folder = SHIPPED.get(name)
    try:
        n = json.loads((folder / "training_log.json").read_text(encoding="utf-8"))["train_tokens"] if folder else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return n if isinstance(n, int) and n > 0 else None


#: The folder of every shipped model and series.
MODELS_DIR = Path(__file__).parent / "models"


def shipped_texts() -> dict[str, Path]:
    """The texts that ship with attnkit, by name ``folder/file`` (``attnkit-tiny-zh/sample_zh.txt``,
    ``attnkit-tiny-steps/eval.txt``, and any other ``.txt`` in a shipped model's or series' folder but a tokenizer's
    ``merges.txt``), in name order."""
    found = sorted(MODELS_DIR.glob("*/*.txt")) if MODELS_DIR.is_dir() else []
    return {f"{p.parent.name}/{p.name}": p for p in found if p.name != "merges.txt" and p.is_file()}


class LoadError(Exception):
    """A model or device could not be loaded; ``str(err)`` is a one-line explanation."""


@dataclass
class Loaded:
    name: str                # what the user asked for
    source: str              # folder or hub repository actually read
    hf_model: object         # the transformers causal LM (eager, float32, eval)
    tokenizer: object
    weights: Weights         # views of hf_model's parameters
    device: torch.device
    notice: str | None = None  # something the user should be told (fallbacks)

    @property
    def config(self):
        return self.weights.config

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; a text longer than the context is cut by its caller, with a notice (so
        transformers' own "longer than the specified maximum" warning is not printed)."""
        return self.tokenizer.encode(text, verbose=False)

    def token_bytes(self, ids) -> list[bytes]:
        """The exact bytes of each token (GPT-2's BPE works on bytes: one emoji can span tokens)."""
        dec = _byte_decoder()
        out = []
        for tok in self.tokenizer.convert_ids_to_tokens([int(i) for i in ids]):
            tok = tok or ""
            out.append(bytes(dec[c] for c in tok) if all(c in dec for c in tok) else tok.encode("utf-8"))
        return out

    def token_strs(self, ids) -> list[str]:
        """Readable tokens: UTF-8 text, with bytes of a character split across tokens shown as \\xNN."""
        return [b.decode("utf-8", errors="backslashreplace") for b in self.token_bytes(ids)]

    def token_groups(self, ids) -> list[Group]:
        """The tokens grouped into whole characters (a character split over tokens is one group)."""
        return char_groups(self.token_bytes(ids))

    def token_texts(self, ids) -> list[str]:
        """Readable tokens for labels: a piece of a split character reads e.g. ``床[1/2]``, ``床[2/2]``."""
        return token_texts(self.token_bytes(ids))

    @property
    def unk_id(self) -> int | None:
        """The tokenizer's unknown token when it has one of its own; None for a byte-level BPE, which never needs
        one (GPT-2's "unk" is its end-of-text token, a real token)."""
        tok = self.tokenizer
        unk = getattr(tok, "unk_token_id", None)
        return None if unk is None or unk in (tok.bos_token_id, tok.eos_token_id) else int(unk)

    def unknown_share(self, ids) -> float:
        """The share of ``ids`` that are the tokenizer's unknown token (0.0 when it has none, or no ids)."""
        ids = [int(i) for i in ids]
        unk = self.unk_id
        return 0.0 if unk is None or not ids else sum(i == unk for i in ids) / len(ids)

    def unknown_notice(self, ids) -> Message | None:
        """One line when some of ``ids`` are the unknown token (the model sees nothing of those words), else None."""
        share = self.unknown_share(ids)
        if not share:
            return None
        n = round(share * len(ids))
        unk = self.tokenizer.unk_token
        if n == len(ids):
            return msg("The whole prompt became {unk}: {model}'s tokenizer knows none of its words, so the model sees "
                       "{n} identical unknown tokens and its patterns and predictions say nothing about the text. "
                       "Type words of its vocabulary (a planted model's card lists them).", unk=unk, model=self.name,
                       n=n)
        return msg("{n} of the prompt's {total} tokens are {unk}: {model}'s tokenizer does not know those words, so "
                   "the model sees nothing of them.", n=n, total=len(ids), unk=unk, model=self.name)


_BYTE_DECODER: dict | None = None


def _byte_decoder() -> dict:
    """GPT-2's printable stand-ins for bytes ('Ġ' is a space) -> the byte values."""
    global _BYTE_DECODER
    if _BYTE_DECODER is None:
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
        cs = bs[:]
        n = 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        _BYTE_DECODER = {chr(c): b for b, c in zip(bs, cs)}
    return _BYTE_DECODER


# ----------------------------------------------------------------------------- devices

def resolve_device(name: str | torch.device = "auto") -> torch.device:
    """'auto' picks cuda, then mps, then cpu; an explicit device that is absent raises LoadError."""
    name = str(name).strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise LoadError(f"device {name!r} is not available: this PyTorch sees no CUDA GPU")
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise LoadError(f"device {name!r} is not available: only {torch.cuda.device_count()} CUDA GPU(s)")
        return dev
    if name == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise LoadError("device 'mps' is not available on this machine")
        return torch.device("mps")
    raise LoadError(f"unknown device {name!r}; use auto, cpu, cuda or mps")


# ----------------------------------------------------------------------------- hub

def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _cached(repo: str, revision: str | None = None) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return False
    hit = try_to_load_from_cache(repo, "config.json", revision=revision)
    return isinstance(hit, str) and os.path.exists(hit)


def hub_available(repo: str, timeout: float = 3.0) -> bool:
    """Whether the hub answers for ``repo`` within ``timeout`` seconds (False when HF_HUB_OFFLINE=1)."""
    if _offline():
        return False
    result: list[bool] = []

    def probe():
        try:
            from huggingface_hub import HfApi

            HfApi().model_info(repo, timeout=timeout)
            result.append(True)
        except Exception:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)     # the hard bound, whatever the HTTP stack does
    return bool(result and result[0])


def default_model(timeout: float = 3.0) -> tuple[str, str | None]:
    """(name, notice): ``gpt2`` where it is cached or the hub answers, else the shipped model."""
    repo = HUB_NAMES[DEFAULT_HUB_MODEL]
    if _cached(repo) or hub_available(repo, timeout):
        return DEFAULT_HUB_MODEL, None
    why = msg("HF_HUB_OFFLINE is set") if _offline() else msg("the HuggingFace hub cannot be reached")
    return SHIPPED_MODEL, join(
        msg("Using the shipped model '{model}' (small, trained offline; not OpenAI's weights): '{hub}' is not cached "
            "and {why}. ", model=SHIPPED_MODEL, hub=DEFAULT_HUB_MODEL, why=why), how_to_get(repo))


def how_to_get(repo: str) -> str:
    """One sentence: how to make a hub model available on a machine that cannot reach the hub."""
    folder = repo.split("/")[-1]
    code = ("python -c \"from transformers import AutoModelForCausalLM as M, AutoTokenizer as T; "
            f"[C.from_pretrained('{repo}').save_pretrained('{folder}') for C in (M, T)]\"")
    return msg("To use it, on a connected machine run {code} — then copy that folder here and choose it as a local "
               "folder, or point HF_HOME at a HuggingFace cache that holds the model.", code=code)


def load_for_cli(name: str | None, device: str, prog: str) -> Loaded | None:
    """The command-line way to load: no name means the default model (its notice goes to stderr);
    a LoadError is printed as ``prog: message`` and gives None."""
    if name is None:
        name, notice = default_model()
        if notice:
            print(notice, file=sys.stderr)
    try:
        return load(name, device)
    except LoadError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None


# ----------------------------------------------------------------------------- folders

def _looks_like_path(name: str) -> bool:
    p = Path(name).expanduser()
    return name.startswith((".", "~")) or p.is_absolute() or "\\" in name or p.exists()


def _check_folder(path: Path) -> None:
    if not path.exists():
        raise LoadError(f"model folder not found: {path}")
    if not path.is_dir():
        raise LoadError(f"not a folder: {path} (give the folder that holds config.json)")
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise LoadError(f"{path} has no config.json: not a HuggingFace checkpoint folder")
    _checked(checkpoint.check_links, path)
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise LoadError(f"{cfg_file} is not valid JSON ({e.__class__.__name__})") from None
    kind = cfg.get("model_type") if isinstance(cfg, dict) else None
    _family(kind, str(path))
    has_st = any(path.glob("*.safetensors"))
    if not has_st:
        pickles = [p.name for p in path.iterdir() if p.suffix in {".bin", ".pt", ".pth", ".ckpt", ".pkl"}]
        if pickles:
            raise LoadError(
                f"{path} has only pickled weights ({', '.join(sorted(pickles))}); attnkit loads safetensors only, "
                "because unpickling can run arbitrary code. Convert it once where you trust the file: "
                "AutoModelForCausalLM.from_pretrained(folder).save_pretrained(folder, safe_serialization=True)"
            )
        raise LoadError(f"{path} has no model.safetensors")


# ----------------------------------------------------------------------------- load

def _family(model_type, where: str):
    """The family for ``model_type``, or a LoadError naming what the folder/repo holds."""
    try:
        return family_for(model_type)
    except UnsupportedModel as e:
        raise LoadError(f"{where} holds a {model_type or 'unknown'!r} model: {e}") from None


def missing_shipped(name: str, folder: Path) -> str:
    """One line: a shipped model's folder is not where the package keeps it (a partial copy or install)."""
    return msg("{model} is not in this installation ({folder} is missing): every shipped model is in attnkit's "
               "wheel, so reinstall it (pip install --force-reinstall attnkit), or give the path of a checkout's "
               "attnkit/models/{model} folder instead of the name.", model=name, folder=str(folder))


def _source(name: str) -> tuple[str, bool]:
    """(folder or repo id, is_local)."""
    if name in SHIPPED:
        if not (SHIPPED[name] / "config.json").is_file():
            raise LoadError(missing_shipped(name, SHIPPED[name]))
        return str(SHIPPED[name]), True
    if name in HUB_NAMES:
        return HUB_NAMES[name], False
    if name in HUB_NAMES.values():
        return name, False
    if _looks_like_path(name):
        return str(Path(name).expanduser()), True
    if name.count("/") == 1 and all(name.split("/")):
        return name, False           # some other hub repository, e.g. a fine-tuned GPT-2
    raise LoadError(
        f"unknown model {name!r}: choose one of {', '.join(MODEL_CHOICES)}, a hub id (owner/name) or a local folder"
    )


def split_revision(name: str) -> tuple[str, str | None]:
    """``owner/name@revision`` -> (``owner/name``, ``revision``): a branch, tag or commit of a hub
    model (Pythia's training checkpoints are branches ``step1000`` … ``step143000``). Shipped names
    and existing folders are never split."""
    if "@" not in name or name in SHIPPED or Path(name).expanduser().exists():
        return name, None
    base, _, rev = name.rpartition("@")
    if not base.strip() or not rev.strip():
        raise LoadError(f"{name!r}: write a revision as NAME@REVISION, e.g. EleutherAI/pythia-70m@step1000")
    return base.strip(), check_revision(rev.strip())


_REV_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+-]*$")


def check_revision(rev: str) -> str:
    """``rev`` when it is a branch, tag or commit name (git's rules, narrowed: parts of letters, digits and
    ``._+-`` joined by single ``/``, no part starting with ``.``, no ``..``, at most 200 characters), else a
    LoadError in one line: huggingface_hub opens ``refs/<revision>`` as a file, so ``../../x`` would read
    any file on this machine as the commit."""
    parts = rev.split("/")
    bad = (not rev or len(rev) > 200 or ".." in rev or rev.endswith((".lock", "."))
           or not all(_REV_PART.match(part) for part in parts))
    if bad:
        shown = rev[:60].encode("unicode_escape").decode("ascii")
        raise LoadError(f"revision {shown!r} is not a branch, tag or commit name (letters, digits and ._+- in "
                        "parts joined by /; no '..', no leading '/' or '.', no spaces or control characters)")
    return rev


def _locate(name: str) -> tuple[str, bool, dict]:
    """(folder or repo id, is_local, keyword arguments for every transformers call) for ``name``."""
    base_name, revision = split_revision(name)
    source, local = _source(base_name)
    kwargs = dict(checkpoint.NO_CODE)       # code in a model folder never runs, whatever a terminal answers
    if local and revision:
        raise LoadError(f"{name!r}: a revision (@{revision}) applies to hub models, not to local folders")
    if revision:
        kwargs["revision"] = revision
    if local:
        _check_folder(Path(source))
        kwargs["local_files_only"] = True
    elif not _cached(source, revision):
        if _offline():
            raise LoadError(f"{name!r} is not in the local HuggingFace cache and HF_HUB_OFFLINE is set. "
                            + how_to_get(source))
        if not hub_available(source):
            also = " (and there is no local folder of that name)" if "/" in name else ""
            raise LoadError(f"{name!r} is not cached and the HuggingFace hub cannot be reached{also}. "
                            + how_to_get(source))
        _fetch_small_files(source, revision)
    else:
        kwargs["local_files_only"] = _offline() or not hub_available(source, 2.0)
    return source, local, kwargs


def locate(name: str) -> str:
    """The folder or hub repository ``name`` resolves to, checked as :func:`load` checks it (LoadError, one line),
    without loading the model: for a command's checks before any work."""
    return _locate(name)[0]


def _fetch_small_files(repo: str, revision: str | None) -> None:
    """Download config.json and tokenizer_config.json of a hub model first, so that what they name
    (custom code, the config's fields) is checked before transformers reads them."""
    try:
        from huggingface_hub import hf_hub_download

        for fname in checkpoint.CODE_FILES:
            try:
                hf_hub_download(repo, fname, revision=revision)
            except Exception:
                continue          # absent here: transformers reports what it needs
    except ImportError:  # pragma: no cover
        pass


def _read_config(name: str, source: str, folder: Path | None, kwargs: dict):
    """(HF config, family), refusing in one line what attnkit cannot compute exactly (the family's
    ``validate``): on config.json's own fields first, as HF's config class may fail on them itself."""
    from transformers import AutoConfig

    raw = _raw_config(folder)
    try:
        if raw is not None:
            _family(raw.get("model_type"), repr(name)).validate(checks.raw(raw))
        cfg = AutoConfig.from_pretrained(source, **kwargs)
    except LoadError:
        raise
    except ValueError as e:
        _refuse_remote_code(name, e)
        raise LoadError(f"{name!r}: {_one_line(e)}") from None
    except Exception as e:
        raise LoadError(f"could not read the config of {name!r}: {e.__class__.__name__}") from None
    family = _family(cfg.model_type, repr(name))
    try:
        family.config(cfg)             # validate(cfg), then what else the family refuses (an unknown activation)
    except ValueError as e:
        raise LoadError(f"{name!r}: {_one_line(e)}") from None
    return cfg, family


def _raw_config(folder: Path | None) -> dict | None:
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8")) if folder is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _one_line(e: Exception) -> str:
    """The first line of an error's message (of its cause, for HF's config validators, whose own first
    line only names the validator)."""
    text = str(e.__cause__ if isinstance(e.__cause__, ValueError) else e).strip()
    return text.splitlines()[0][:300] if text else e.__class__.__name__


def _build(name: str, source: str, local: bool, kwargs: dict):
    """(HF model, tokenizer, notice): the model in float32 with eager attention, and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    try:
        hf_logging.disable_progress_bar()
        model = AutoModelForCausalLM.from_pretrained(
            source, attn_implementation="eager", dtype=torch.float32, use_safetensors=True, **kwargs)
        notice = None
        if local and not _has_tokenizer(Path(source)):
            tokenizer, notice = _fallback_tokenizer(model.config.vocab_size, Path(source))
        else:
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    except LoadError:
        raise
    except Exception as e:
        _refuse_remote_code(name, e)
        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise LoadError(f"could not load {name!r}: {e.__class__.__name__}: {msg}") from None
    return model, tokenizer, notice


def _refuse_remote_code(name: str, e: Exception) -> None:
    """transformers refusing custom code that attnkit's own check did not see: the same one line."""
    if "custom code" in str(e) or "trust_remote_code" in str(e):
        raise LoadError(f"{name!r} names custom code (transformers asked for trust_remote_code); "
                        "attnkit never runs code from a model folder") from None


def _checked(check, *args, **kwargs) -> None:
    """Run one of attnkit/checkpoint.py's checks, its CheckpointError becoming a LoadError."""
    try:
        check(*args, **kwargs)
    except checkpoint.CheckpointError as e:
        raise LoadError(str(e)) from None


def load(name_or_path: str, device: str | torch.device = "auto") -> Loaded:
    """Load a checkpoint of a supported family (``NAME@REVISION`` for a hub revision) and its tokenizer.

    Nothing in the folder runs: a folder naming custom code is refused before transformers reads it,
    and every transformers call is given ``trust_remote_code=False``."""
    name = str(name_or_path).strip()
    if not name:
        raise LoadError("no model given")
    dev = resolve_device(device)
    source, local, kwargs = _locate(name)
    revision = kwargs.get("revision")
    folder = Path(source) if local else checkpoint.snapshot_folder(source, revision)
    _checked(checkpoint.check_links, folder)
    _checked(checkpoint.check_no_custom_code, folder, repr(name))
    with checkpoint.HF_BUILD_LOCK:         # transformers builds under process-wide switches: one load at a time
        cfg, _ = _read_config(name, source, folder, kwargs)
        # checkpoint checks before building (attnkit/checkpoint.py): header vs config, memory, tokenizer.json
        _checked(checkpoint.before_build, source, local, kwargs.get("local_files_only", False), cfg, revision)
        model, tokenizer, notice = _build(name, source, local, kwargs)
    _checked(checkpoint.after_build, model, tokenizer)   # NaN/Inf weights, tokenizer vs embedding
    model.eval().to(dev)
    tokenizer.model_max_length = 10**9     # attnkit cuts to the context itself, and says so
    try:
        weights = extract(model)
    except ValueError as e:                # the family refused what HF built (e.g. rotary frequencies)
        raise LoadError(f"could not load {name!r}: {_one_line(e)}") from None
    return Loaded(name=name, source=source, hf_model=model, tokenizer=tokenizer, weights=weights,
                  device=dev, notice=notice)


def _has_tokenizer(path: Path) -> bool:
    return (path / "tokenizer.json").is_file() or (path / "vocab.json").is_file()


def _fallback_tokenizer(vocab_size: int, path: Path):
    """A folder without tokenizer files (e.g. weights saved on their own): borrow one that fits."""
    from transformers import AutoTokenizer

    for repo in (HUB_NAMES[DEFAULT_HUB_MODEL],):
        if vocab_size >= 50257 and _cached(repo):
            return (AutoTokenizer.from_pretrained(repo, local_files_only=True, **checkpoint.NO_CODE),
                    f"{path} has no tokenizer files; using GPT-2's tokenizer from the local cache.")
    shipped = SHIPPED[SHIPPED_MODEL]
    if _has_tokenizer(shipped):
        tok = AutoTokenizer.from_pretrained(str(shipped), local_files_only=True, **checkpoint.NO_CODE)
        if len(tok) <= vocab_size:
            return tok, (f"{path} has no tokenizer files; text is tokenized with the {SHIPPED_MODEL} tokenizer "
                         f"({len(tok)} tokens), whose ids all exist in this model's vocabulary of {vocab_size}.")
    raise LoadError(f"{path} has no tokenizer files (tokenizer.json or vocab.json + merges.txt)")
