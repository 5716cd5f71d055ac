"""A *series*: an ordered list of checkpoints of one architecture and tokenizer (a model over training).

Written as (:func:`resolve`):

    attnkit-tiny-steps                              the shipped series (attnkit/models/attnkit-tiny-steps)
    path/to/run/steps                               a folder of step folders ``step-NNNNNN/`` (each an ordinary
                                                    checkpoint); its ``series.json`` may give steps, tokens
                                                    seen and losses
    EleutherAI/pythia-160m@step0,step1000,step2000  a hub model at a list of revisions
    EleutherAI/pythia-160m@step0..step143000/16     16 revisions evenly spaced between the two (the cached or
                                                    listed revisions nearest to each; else rounded to the
                                                    endpoints' shared power of ten)

Each checkpoint is later loaded with :func:`attnkit.loading.load` (every check of a single load, the
revision's included). :func:`check_consistent` refuses, before any model is built, a series whose
checkpoints differ in config (other than dtype and bookkeeping fields) or tokenizer, in one line naming
the checkpoint that differs. Core: imports only core modules.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import checkpoint
from .loading import LoadError, missing_shipped, split_revision

__all__ = ["Member", "Series", "SERIES_FILE", "STEP_DIR", "SHIPPED_SERIES", "SHIPPED_SERIES_NAME", "resolve",
           "check_consistent", "SeriesError", "shape_of"]

#: The index of a series folder, and the name of each step folder (the snapshots' writer uses both).
SERIES_FILE = "series.json"
STEP_DIR = "step-{:06d}"
_STEP_RE = re.compile(r"^step-(\d+)$")
SHIPPED_SERIES_NAME = "attnkit-tiny-steps"
SHIPPED_SERIES = {SHIPPED_SERIES_NAME: Path(__file__).parent / "models" / SHIPPED_SERIES_NAME}
#: config.json fields that may differ along a series (precision, bookkeeping).
_FREE_FIELDS = {"dtype", "torch_dtype", "transformers_version", "_name_or_path", "_commit_hash", "use_cache"}
_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model")
MAX_MEMBERS = 1000


class SeriesError(LoadError):
    """A series cannot be formed; ``str(err)`` is one line."""


@dataclass(frozen=True)
class Member:
    """One checkpoint of a series."""

    step: int
    label: str                         # step-000200 (folder) or step1000 (revision)
    name: str                          # what attnkit.loading.load takes: an absolute folder or repo@revision
    folder: Path | None                # the folder holding its files (None: a hub revision not cached yet)
    info: dict = field(default_factory=dict, hash=False, compare=False)   # its series.json row

    @property
    def tokens_seen(self):
        return self.info.get("tokens_seen")

    @property
    def val_loss(self):
        return self.info.get("val_loss")


@dataclass
class Series:
    name: str                          # what the user asked for
    source: str                        # folder or hub repository
    members: list[Member]
    about: str = ""
    texts: Path | None = None          # evaluation text shipped with the series (series.json "texts")
    train_block: int | None = None     # the window length it was trained on (series.json "train_block"), when
                                       # shorter than the context: the ICL score's positions stay inside it

    def __len__(self) -> int:
        return len(self.members)

    @property
    def steps(self) -> list[int]:
        return [m.step for m in self.members]

    def member(self, step: int) -> Member:
        for m in self.members:
            if m.step == step:
                return m
        raise SeriesError(f"{self.name}: no checkpoint at step {step}; steps are {', '.join(map(str, self.steps))}")


# ----------------------------------------------------------------------------- folders

def _folder_series(name: str, root: Path) -> Series:
    if not root.is_dir():
        raise SeriesError(f"series folder not found: {root}")
    index = _read_index(root)
    rows = {r.get("folder"): r for r in index.get("checkpoints", []) if isinstance(r, dict)}
    members = []
    for sub in sorted(root.iterdir()):
        m = _STEP_RE.match(sub.name)
        if m and sub.is_dir():
            row = rows.get(sub.name, {})
            step = row.get("step", int(m.group(1)))
            members.append(Member(int(step), sub.name, str(sub.resolve()), sub.resolve(), dict(row)))
    if not members:
        raise SeriesError(f"{root} holds no step folders (step-000000/, step-000100/, …): not a series folder")
    missing = sorted(set(rows) - {m.label for m in members} - {None})
    if missing:
        raise SeriesError(f"{root / SERIES_FILE} lists {missing[0]}, which is not a folder there")
    members.sort(key=lambda m: m.step)
    texts = index.get("texts")
    text_path = (root / texts) if isinstance(texts, str) and (root / texts).is_file() else None
    block = index.get("train_block")
    block = block if isinstance(block, int) and not isinstance(block, bool) and block >= 20 else None
    return Series(name, str(root.resolve()), members, str(index.get("about", "")), text_path, block)


def _read_index(root: Path) -> dict:
    f = root / SERIES_FILE
    if not f.is_file():
        return {}
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SeriesError(f"{f} is not valid JSON ({e.__class__.__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("checkpoints", []), list):
        raise SeriesError(f"{f} is not a series index (expected {{\"checkpoints\": [...]}})")
    return data


# ----------------------------------------------------------------------------- hub revisions

def _revision_parts(rev: str) -> tuple[str, int] | None:
    m = re.fullmatch(r"(\D*?)(\d+)", rev)
    return (m.group(1), int(m.group(2))) if m else None


def _cached_refs(repo: str) -> list[str]:
    """Branch and tag names of ``repo`` in the local HuggingFace cache."""
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover
        return []
    refs = Path(constants.HF_HUB_CACHE) / ("models--" + repo.replace("/", "--")) / "refs"
    return sorted(str(p.relative_to(refs)) for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []


def _range(repo: str, spec: str) -> list[str]:
    """``stepA..stepB/N`` -> N revision names between the two, nearest to evenly spaced targets."""
    m = re.fullmatch(r"(.+?)\.\.(.+?)/(\d+)", spec)
    a, b = (_revision_parts(m.group(1)), _revision_parts(m.group(2))) if m else (None, None)
    if not m or a is None or b is None or a[0] != b[0] or a[1] >= b[1] or int(m.group(3)) < 2:
        raise SeriesError(f"{spec!r}: write a range as REV0..REV1/N, e.g. step0..step143000/16 (same prefix, "
                          "REV0 < REV1, N ≥ 2)")
    prefix, n = a[0], int(m.group(3))
    if n > MAX_MEMBERS:
        raise SeriesError(f"{spec!r}: at most {MAX_MEMBERS} checkpoints in a series")
    targets = [a[1] + (b[1] - a[1]) * k / (n - 1) for k in range(n)]
    known = sorted({p[1] for r in _cached_refs(repo) if (p := _revision_parts(r)) and p[0] == prefix
                    and a[1] <= p[1] <= b[1]} | {a[1], b[1]})
    if len(known) > 2:
        picks = [min(known, key=lambda s, t=t: abs(s - t)) for t in targets]
    else:
        grain = 10 ** min(_tens(a[1]), _tens(b[1]))
        picks = [int(round(t / grain)) * grain for t in targets]
    return [f"{prefix}{s}" for s in dict.fromkeys(picks)]


def _tens(x: int) -> int:
    """The largest k ≤ 6 with 10^k dividing x (6 for 0)."""
    k = 0
    while k < 6 and x % (10 ** (k + 1)) == 0:
        k += 1
    return k


def _hub_series(name: str, repo: str, spec: str) -> Series:
    revs = _range(repo, spec) if ".." in spec else [r.strip() for r in spec.split(",")]
    if any(not r for r in revs) or len(revs) < 2:
        raise SeriesError(f"{name!r}: give at least two revisions, e.g. {repo}@step0,step1000 or "
                          f"{repo}@step0..step143000/16")
    if len(set(revs)) != len(revs):
        raise SeriesError(f"{name!r}: revision {next(r for r in revs if revs.count(r) > 1)!r} is listed twice")
    members = []
    for k, rev in enumerate(revs):
        full = f"{repo}@{rev}"
        split_revision(full)                                    # the one check of NAME@REVISION
        parts = _revision_parts(rev)
        members.append(Member(parts[1] if parts else k, rev, full, checkpoint.snapshot_folder(repo, rev)))
    steps = [m.step for m in members]
    if steps != sorted(steps):
        raise SeriesError(f"{name!r}: list the revisions in training order (steps {', '.join(map(str, steps))})")
    return Series(name, repo, members)


def resolve(spec: str) -> Series:
    """The series named by ``spec`` (see the module docstring); SeriesError in one line when it is not one."""
    spec = str(spec).strip()
    if not spec:
        raise SeriesError("no series given")
    if spec in SHIPPED_SERIES:
        if not (SHIPPED_SERIES[spec] / SERIES_FILE).is_file():
            raise SeriesError(missing_shipped(spec, SHIPPED_SERIES[spec]))
        return _folder_series(spec, SHIPPED_SERIES[spec])
    path = Path(spec).expanduser()
    if path.exists() or spec.startswith((".", "~", "/")):
        return _folder_series(spec, path)
    if "@" not in spec:
        raise SeriesError(f"{spec!r} is not a series: give {SHIPPED_SERIES_NAME}, a folder of step folders, or a "
                          "hub model with revisions (NAME@step0,step1000 or NAME@step0..step143000/16)")
    repo, _, revs = spec.rpartition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise SeriesError(f"{spec!r}: a hub series is OWNER/NAME@REVISIONS, e.g. EleutherAI/pythia-70m@step0,step1000")
    return _hub_series(spec, repo, revs)


# ----------------------------------------------------------------------------- consistency

def _config_of(m: Member) -> dict | None:
    if m.folder is None or not (m.folder / "config.json").is_file():
        return None
    try:
        data = json.loads((m.folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {k: v for k, v in data.items() if k not in _FREE_FIELDS} if isinstance(data, dict) else None


def _tokenizer_digest(m: Member) -> str | None:
    if m.folder is None:
        return None
    h, seen = hashlib.sha256(), False
    for f in _TOKENIZER_FILES:
        p = m.folder / f
        if p.is_file():
            h.update(f.encode() + b"\0" + p.read_bytes())
            seen = True
    return h.hexdigest() if seen else None


def check_consistent(series: Series) -> None:
    """Same config (up to dtype and bookkeeping) and the same tokenizer files at every checkpoint whose files
    are here; else SeriesError naming the first checkpoint that differs and how."""
    first = series.members[0]
    cfg0, tok0 = _config_of(first), _tokenizer_digest(first)
    for m in series.members[1:]:
        cfg = _config_of(m)
        if cfg0 is not None and cfg is not None and cfg != cfg0:
            key = next(k for k in sorted(set(cfg) | set(cfg0)) if cfg.get(k) != cfg0.get(k))
            raise SeriesError(f"{series.name}: checkpoint {m.label} differs from {first.label} in its config: "
                              f"{key} = {_short(cfg.get(key))}, not {_short(cfg0.get(key))}")
        tok = _tokenizer_digest(m)
        if tok0 is not None and tok is not None and tok != tok0:
            raise SeriesError(f"{series.name}: checkpoint {m.label} has another tokenizer than {first.label}")


def _short(v) -> str:
    text = json.dumps(v, ensure_ascii=False) if v is not None else "(absent)"
    return text if len(text) <= 60 else text[:57] + "…"


def shape_of(config) -> tuple:
    """The fields of a loaded model's standard config (attnkit.standard.ModelConfig) a series must share."""
    return tuple((k, getattr(config, k, None)) for k in ("n_layers", "n_heads", "d_model", "d_head", "d_vocab", "n_ctx"))
