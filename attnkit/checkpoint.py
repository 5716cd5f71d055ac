"""Checks on a checkpoint that run before (and right after) HuggingFace builds the model.

Everything here reads headers and configs only, so a hostile ``config.json`` (100,000 layers,
n_embd 10⁷) or a broken weights file is refused in well under a second, with a plain
one-line message, instead of tying the process up for minutes:

* :func:`weight_files`: ``model.safetensors``, or the shards of ``model.safetensors.index.json``
  (an index that points outside its folder is refused; in a HuggingFace cache snapshot the shards are
  links into ``../../blobs``, and the folder is the whole ``models--owner--name`` cache repository).
* :func:`check_no_custom_code`: a folder whose config or tokenizer config names custom code
  (``auto_map``, ``trust_remote_code``, a tokenizer class transformers does not have) is refused.
* :func:`read_header`: a safetensors header (JSON) without touching the tensor data.
* :func:`expected_tensors`: the tensors the HF model class needs, by name and shape, from the class
  itself built on the ``meta`` device (no memory), so this works for any family HF knows.
* :func:`check_before_build`: config vs machine memory, then config vs file header
  (missing tensors named, shape mismatches in one sentence, truncated files).
* :func:`check_after_build`: NaN/Inf in the weights (the tensor is named), a tokenizer whose
  vocabulary is larger than the embedding.
* :func:`check_tokenizer_files`: a malformed ``tokenizer.json`` is named.

Every failure raises :class:`CheckpointError` whose ``str`` is a one-line message for the user.

HuggingFace builds a model under process-wide switches — torch's default dtype, ``torch.nn.init``'s
functions and ``PreTrainedModel.init_weights``/``tie_weights`` swapped for no-ops, the meta device for
the empty model — each set on entry and restored on exit. Two builds at once in one process (a dashboard
serving many sessions, a job per session) restore each other's switches mid-build: wrong dtypes, meta
tensors, an untied ``lm_head.weight``. :data:`HF_BUILD_LOCK` makes every HF construction in attnkit one at
a time (the meta models here, and the load in :mod:`attnkit.loading`).
"""
from __future__ import annotations

import copy
import json
import math
import os
import re
import struct
import threading
from pathlib import Path

import torch

__all__ = ["CheckpointError", "INDEX_FILE", "WEIGHTS_FILE", "available_memory",
           "read_header", "weight_files", "expected_tensors", "estimate_bytes",
           "check_before_build", "check_after_build", "check_tokenizer_files", "check_config",
           "custom_code", "check_no_custom_code", "snapshot_folder", "NO_CODE", "inside", "check_links",
           "HF_BUILD_LOCK"]

WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
#: A safetensors header larger than this is not a checkpoint anyone made on purpose.
MAX_HEADER_BYTES = 100 * 2**20
#: Layers up to which the expected tensors come from the full meta model; above, from a 2-layer template.
FULL_META_LAYERS = 64
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}


#: Held while transformers builds or reads a model, config or tokenizer (see the module's docstring): re-entrant,
#: so a build may check its config's meta model inside it.
HF_BUILD_LOCK = threading.RLock()


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; ``str(err)`` is a one-line explanation."""


def _mb(n: float) -> str:
    return f"{n / 2**30:,.1f} GB" if n >= 2**30 else f"{n / 2**20:,.0f} MB"


def _names(names, n: int = 5) -> str:
    names = list(names)
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n:,} more" if len(names) > n else "")


# ----------------------------------------------------------------------------- memory

def available_memory() -> int | None:
    """Bytes of memory available to a new allocation: MemAvailable (Linux), else free physical pages.
    The smaller of that and a cgroup limit (containers). None when unknown."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = None
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            limit = Path(limit_file).read_text().strip()
            if limit == "max" or int(limit) >= 2**60:
                continue
            room = int(limit) - int(Path(usage_file).read_text().strip())
            avail = room if avail is None else min(avail, room)
        except (OSError, ValueError):
            continue
    return avail


# ----------------------------------------------------------------------------- safetensors headers

def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...], int]]:
    """{tensor name: (dtype, shape, bytes)} from a safetensors file's header; the data is not read."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise CheckpointError(f"{path} is not a safetensors file (it has {size} bytes)")
            (n,) = struct.unpack("<Q", raw)
            if n > min(size - 8, MAX_HEADER_BYTES):
                raise CheckpointError(f"{path} is not a safetensors file, or is truncated "
                                      f"(its header claims {n:,} bytes; the file has {size:,})")
            head = f.read(n)
    except OSError as e:
        raise CheckpointError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        meta = json.loads(head.decode("utf-8"))
    except (ValueError, RecursionError):
        raise CheckpointError(f"{path} is not a safetensors file: its header is not valid JSON") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path} is not a safetensors file: its header is not a JSON object")
    data_bytes = size - 8 - n
    out = {}
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], tuple(int(d) for d in info["shape"]), info["data_offsets"]
            begin, end = int(begin), int(end)
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: the header entry of tensor {name!r} is malformed") from None
        need = math.prod(shape) * _DTYPE_BYTES.get(dtype, 0)
        if dtype in _DTYPE_BYTES and (end - begin != need or min(shape, default=0) < 0):
            raise CheckpointError(f"{path}: tensor {name} is {dtype} {list(shape)} ({need:,} bytes) but the header "
                                  f"gives it {end - begin:,} bytes")
        if end > data_bytes or begin < 0:
            raise CheckpointError(f"{path} is truncated: tensor {name} ends at byte {end:,} of the data, "
                                  f"but the file holds only {data_bytes:,} bytes of data")
        out[name] = (dtype, shape, end - begin)
    return out


def _root(folder: Path) -> Path:
    """Where the files of ``folder`` may resolve to: the folder itself, or for a snapshot of the HF cache
    (``models--owner--name/snapshots/<commit>``, whose files link into ``../../blobs``) that cache repository."""
    f = Path(os.path.abspath(folder))
    if f.parent.name == "snapshots" and f.parent.parent.name.startswith("models--"):
        return f.parent.parent.resolve()
    return f.resolve()


def inside(folder: Path, name: str) -> bool:
    """Whether ``folder / name`` resolves inside ``folder`` (no absolute name, no ``..``, no symlink leading
    out; in an HF cache snapshot, links into the same ``models--…`` repository's blobs are inside)."""
    try:
        return (Path(folder) / name).resolve().is_relative_to(_root(Path(folder))) and not Path(name).is_absolute()
    except (OSError, RuntimeError, ValueError):
        return False


READ_SUFFIXES = (".json", ".txt", ".model", ".safetensors", ".tiktoken")


def check_links(folder: Path | None) -> None:
    """A file transformers may read from ``folder`` (config.json, the tokenizer's files, weights) that is a
    link to somewhere outside the folder is refused, as an index naming a shard outside is."""
    if folder is None or not Path(folder).is_dir():
        return
    for p in sorted(Path(folder).iterdir()):
        if p.suffix in READ_SUFFIXES and not inside(folder, p.name):
            raise CheckpointError(f"{p} links outside its folder; refused: a checkpoint may only read files in "
                                  f"{_root(Path(folder))}")


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files HF would read from ``folder``: model.safetensors, else the index's shards.

    A shard named by the index must be a file inside ``folder`` (no absolute paths, no ``..``, no symlink
    leading out; in an HF cache snapshot, links into the same ``models--…`` repository's blobs are inside)."""
    folder = Path(folder)
    single = folder / WEIGHTS_FILE
    if single.is_file():
        return [single]
    index = folder / INDEX_FILE
    if not index.is_file():
        raise CheckpointError(f"{folder} has no {WEIGHTS_FILE} (nor a sharded {INDEX_FILE})")
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
        weight_map = data["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        raise CheckpointError(f"{index} is not a valid index (JSON with a 'weight_map' of tensor -> file)") from None
    if not shards or not all(isinstance(s, str) and s for s in shards):
        raise CheckpointError(f"{index} is not a valid index: its weight_map names no files")
    root = _root(folder)
    out = []
    for s in shards:
        p = (folder / s)
        if not inside(folder, s):
            raise CheckpointError(f"{index} points outside its folder ({s!r}); refused: a checkpoint may only "
                                  f"read files in {root}")
        if not p.is_file():
            raise CheckpointError(f"{index} names the shard {s!r}, which is not in {folder}")
        out.append(p)
    return out


def _header_of(folder: Path) -> tuple[dict, str]:
    files = weight_files(folder)
    header: dict = {}
    for f in files:
        header.update(read_header(f))
    what = files[0].name if len(files) == 1 else f"the {len(files)} shards of {INDEX_FILE}"
    return header, what


# ----------------------------------------------------------------------------- what the config asks for

def _meta_model(cfg, n_layers: int | None = None):
    from transformers import AutoModelForCausalLM

    cfg = copy.deepcopy(cfg)
    if n_layers is not None:
        cfg.num_hidden_layers = n_layers
    try:
        with HF_BUILD_LOCK, torch.device("meta"):
            return AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", **NO_CODE)
    except Exception as e:
        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else e.__class__.__name__
        raise CheckpointError(f"config.json describes a model HuggingFace cannot build: {msg}") from None


def _tensors(model) -> tuple[list[tuple[tuple[str, ...], tuple[int, ...]]], str]:
    """[(names one tensor may be stored under, shape)], base_model_prefix. Tied weights (e.g. lm_head.weight
    and the token embedding) are one tensor with several names: any of them satisfies it."""
    groups: dict[int, list] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), [[], tuple(p.shape)])[0].append(name)
    out = [(tuple(names), shape) for names, shape in groups.values()]
    buffers = dict(model.named_buffers())
    out += [((n,), tuple(buffers[n].shape)) for n in model.state_dict(keep_vars=True) if n in buffers]
    return out, getattr(model, "base_model_prefix", "") or ""


def _num_layers(cfg) -> int | None:
    try:
        n = int(cfg.num_hidden_layers)
    except (AttributeError, TypeError, ValueError):
        return None
    return n


def expected_tensors(cfg):
    """(iterator factory over [(names, shape)], number of tensors, float32 bytes, base prefix) for ``cfg``.

    Up to FULL_META_LAYERS layers the HF class is built on the meta device as it is; above, the 1- and
    2-layer models give the non-layer tensors and one layer's tensors, which are repeated (so a config of
    100,000 layers costs milliseconds)."""
    L = _num_layers(cfg)
    if L is None or L < 0:
        raise CheckpointError("config.json has no valid number of layers")
    if L <= FULL_META_LAYERS:
        items, prefix = _tensors(_meta_model(cfg))
        nbytes = sum(4 * math.prod(s) for _, s in items)
        return (lambda: iter(items)), len(items), nbytes, prefix
    one, prefix = _tensors(_meta_model(cfg, 1))
    two, _ = _tensors(_meta_model(cfg, 2))
    one_names = {n for names, _ in one for n in names}
    layer1 = [(names, s) for names, s in two if not any(n in one_names for n in names)]
    # the same tensors with index 0: the template of one layer
    templ = []
    for names, s in layer1:
        t = tuple(n.replace(".1.", ".{i}.", 1) for n in names)
        templ.append((t, s))
    templ_zero = {n.format(i=0) for names, _ in templ for n in names}
    fixed = [(names, s) for names, s in one if not any(n in templ_zero for n in names)]
    per_layer = sum(4 * math.prod(s) for _, s in templ)
    nbytes = sum(4 * math.prod(s) for _, s in fixed) + L * per_layer

    def it():
        yield from fixed
        for i in range(L):
            for names, s in templ:
                yield tuple(n.format(i=i) for n in names), s
    return it, len(fixed) + L * len(templ), nbytes, prefix


def estimate_bytes(cfg) -> int:
    """Bytes of the model's parameters in float32 (attnkit always loads float32)."""
    return expected_tensors(cfg)[2]


# ----------------------------------------------------------------------------- checks

def check_config(cfg, memory: int | None = None) -> tuple:
    """The estimated float32 parameter bytes against the machine's available memory (an unknown activation
    function is the family's to refuse: attnkit/families). Returns expected_tensors(cfg) for the header check."""
    exp = expected_tensors(cfg)
    need = exp[2]
    have = available_memory() if memory is None else memory
    if have is not None and need > have:
        L = _num_layers(cfg)
        raise CheckpointError(
            f"config.json describes a model of {need // 4:,} parameters ({L:,} layers), about {_mb(need)} in "
            f"float32, but this machine has only {_mb(have)} of memory available; refused before loading")
    return exp


def _aliases(name: str, prefix: str) -> list[str]:
    """The names HF may map a stored key to: with/without the base-model prefix, old gamma/beta names."""
    cands = [name]
    if name.endswith(".gamma"):
        cands.append(name[:-6] + ".weight")
    elif name.endswith(".beta"):
        cands.append(name[:-5] + ".bias")
    for c in list(cands):
        if prefix:
            cands.append(c[len(prefix) + 1:] if c.startswith(prefix + ".") else f"{prefix}.{c}")
    return cands


def _hf_renames(cfg) -> list[tuple[str, str]]:
    """(pattern, replacement) pairs HF's checkpoint conversion mapping applies to stored keys on load for the
    causal-LM class of ``cfg`` (transformers 5: GPT-NeoX's ``embed_out.`` -> ``lm_head.``). Renamings only."""
    try:
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:  # pragma: no cover - transformers 4.x renames nothing here
        return []
    model_type = getattr(cfg, "model_type", None)
    out = []
    for kind in filter(None, {model_type, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)}):
        for r in get_checkpoint_conversion_mapping(kind) or []:
            if type(r).__name__ == "WeightRenaming":
                out += list(zip(r.source_patterns, r.target_patterns))
    return out


def check_before_build(folder: Path, cfg, memory: int | None = None) -> None:
    """Config vs memory, then config vs the weights file(s) header: every tensor present, shapes equal."""
    folder = Path(folder)
    it, count, _, prefix = check_config(cfg, memory)
    header, what = _header_of(folder)
    stored: dict[str, tuple] = {}
    renames = _hf_renames(cfg)
    for k, (_, shape, _) in header.items():
        for alias in _aliases(k, prefix) + [re.sub(a, b, k) for a, b in renames if re.search(a, k)]:
            stored.setdefault(alias, shape)
    exact = count <= 200_000 or count <= len(header)     # else: far more tensors asked for than the file holds
    missing, mismatched, n_missing = [], [], 0
    for names, shape in it():
        hit = next((n for n in names if n in stored), None)
        if hit is None:
            n_missing += 1
            if len(missing) < 5:
                missing.append(names[0])
            elif not exact:
                break
            continue
        if tuple(stored[hit]) != tuple(shape) and len(mismatched) < 3:
            mismatched.append((hit, stored[hit], shape))
    if not exact and n_missing:
        n_missing = max(n_missing, count - len(header))
    if n_missing:
        L = _num_layers(cfg)
        raise CheckpointError(
            f"{what} lacks {'at least ' if not exact else ''}{n_missing:,} of the {count:,} tensors config.json ({L:,} layers) asks for: "
            f"{_names(missing)}{' …' if n_missing > len(missing) else ''}; refused (they would be random)")
    if mismatched:
        name, got, want = mismatched[0]
        more = f" (and other tensors too)" if len(mismatched) > 1 else ""
        raise CheckpointError(
            f"{what} does not fit config.json: tensor {name} has shape {list(got)} in the file but the config "
            f"asks for {list(want)}{more}; the config and the weights come from different models")


def check_tokenizer_files(folder: Path) -> None:
    """A tokenizer.json that is not valid JSON, or not a tokenizer, is named."""
    p = Path(folder) / "tokenizer.json"
    if not p.is_file():
        return
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{p} is not valid UTF-8 (first bad byte at offset {e.start})") from None
    except (OSError, ValueError, RecursionError) as e:
        where = f" at line {e.lineno}" if hasattr(e, "lineno") else ""
        raise CheckpointError(f"{p} is malformed: not valid JSON{where}") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise CheckpointError(f"{p} is malformed: it has no 'model' section (is it a HuggingFace tokenizer?)")


def check_after_build(model, tokenizer=None) -> None:
    """NaN/Inf in any weight (the first such tensor is named) and a tokenizer larger than the embedding."""
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if p.is_floating_point() and not bool(torch.isfinite(p).all()):
                bad = int((~torch.isfinite(p)).sum())
                kind = "NaN" if bool(torch.isnan(p).any()) else "Inf"
                raise CheckpointError(f"the weights hold {kind} values: tensor {name} has {bad:,} non-finite of "
                                      f"{p.numel():,} entries; every number computed from them would be NaN")
    if tokenizer is not None:
        emb = model.get_input_embeddings()
        rows = int(emb.weight.shape[0]) if emb is not None else None
        n_tok = len(tokenizer)
        if rows is not None and n_tok > rows:
            raise CheckpointError(f"the tokenizer has {n_tok:,} tokens but the model's embedding has only "
                                  f"{rows:,} rows; token ids ≥ {rows:,} would not exist in the model")


# ----------------------------------------------------------------------------- custom code

#: what every transformers call attnkit makes is given: code in a model folder never runs
NO_CODE = {"trust_remote_code": False}
#: the files of a model folder in which transformers looks for code to import
CODE_FILES = ("config.json", "tokenizer_config.json")


def _known_tokenizer(name) -> bool:
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    if not isinstance(name, str) or not name.isidentifier():
        return False
    try:
        return any(tokenizer_class_from_name(n) is not None for n in (name, name + "Fast", name.removesuffix("Fast")))
    except Exception:
        return False


def custom_code(folder: Path) -> str | None:
    """What in ``folder``'s config.json / tokenizer_config.json names custom code
    (e.g. ``"auto_map in tokenizer_config.json"``), or None."""
    for fname in CODE_FILES:
        p = Path(folder) / fname
        try:
            data = json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None
        except (OSError, ValueError, RecursionError):
            continue                  # a malformed file is named where it is read; it names no code
        if not isinstance(data, dict):
            continue
        for key in ("auto_map", "trust_remote_code", "custom_pipelines"):
            if data.get(key):
                return f"{key} in {fname}"
        cls = data.get("tokenizer_class")
        if cls is not None and not _known_tokenizer(cls):
            return f"tokenizer_class {str(cls)[:80]!r} in {fname}, which transformers does not have"
    return None


def check_no_custom_code(folder: Path | None, what: str) -> None:
    """Refuse, before transformers reads the folder (and could ask to run its code), a folder naming code."""
    found = custom_code(folder) if folder is not None else None
    if found:
        raise CheckpointError(f"{what} names custom code ({found}); attnkit never runs code from a model folder")


# ----------------------------------------------------------------------------- entry points for loading.py

def snapshot_folder(repo: str, revision: str | None = None) -> Path | None:
    """The HF cache folder holding ``repo``'s config.json at ``revision`` (a branch or tag via
    ``refs/<revision>``, or a commit's own snapshot; None: main), or None when it is not cached."""
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(repo, "config.json", revision=revision)
    except Exception:
        return None
    return Path(hit).parent if isinstance(hit, str) and os.path.exists(hit) else None


def _folder_of(source: str, local: bool, revision: str | None = None) -> Path | None:
    return Path(source) if local else snapshot_folder(source, revision)


def before_build(source: str, local: bool, local_files_only: bool = True, cfg=None,
                 revision: str | None = None) -> None:
    """All checks that need no model: tokenizer.json, config vs memory, config vs weights header (of
    ``revision``'s snapshot for a cached hub model). For a hub model whose weights are not in the cache
    yet, only the config is checked. ``cfg``: the HF config when the caller has read it already."""
    from transformers import AutoConfig

    folder = _folder_of(source, local, revision)
    if folder is not None:
        check_tokenizer_files(folder)
    try:
        cfg = cfg if cfg is not None else AutoConfig.from_pretrained(
            source, local_files_only=local_files_only, revision=revision, **NO_CODE)
    except Exception as e:
        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise CheckpointError(f"could not read the config of {source}: {e.__class__.__name__}: {msg}") from None
    if folder is not None and ((folder / WEIGHTS_FILE).is_file() or (folder / INDEX_FILE).is_file() or local):
        check_before_build(folder, cfg)
    else:
        check_config(cfg)


def after_build(model, tokenizer) -> None:
    check_after_build(model, tokenizer)
