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
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import checkpoint, files
from .files import MB
from .i18n import msg
from .loading import LoadError, missing_shipped, split_revision

__all__ = ["Member", "Series", "Index", "SERIES_FILE", "STEP_DIR", "SHIPPED_SERIES", "SHIPPED_SERIES_NAME", "resolve",
           "read_index", "read_texts", "whole_number", "is_folder", "check_consistent", "SeriesError", "shape_of"]

#: The index of a series folder, and the name of each step folder (the snapshots' writer uses both).
SERIES_FILE = "series.json"
STEP_DIR = "step-{:06d}"
_STEP_RE = re.compile(r"^step-([0-9]+)$", re.ASCII)
SHIPPED_SERIES_NAME = "attnkit-tiny-steps"
SHIPPED_SERIES = {SHIPPED_SERIES_NAME: Path(__file__).parent / "models" / SHIPPED_SERIES_NAME}
#: config.json fields that may differ along a series (precision, bookkeeping).
_FREE_FIELDS = {"dtype", "torch_dtype", "transformers_version", "_name_or_path", "_commit_hash", "use_cache"}
_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model")
MAX_MEMBERS = 1000
#: Size caps of the files a series folder holds (a bigger one is refused, not read).
SERIES_JSON_MAX = 4 * MB
TEXTS_MAX = 64 * MB
CONFIG_MAX = 16 * MB
TOKENIZER_MAX = 256 * MB
#: The shortest trained window series.json's train_block may give (the ICL score's shortest window).
MIN_TRAIN_BLOCK = 20


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
        raise SeriesError(msg("{series}: no checkpoint at step {step}; steps are {steps}", series=self.name, step=step,
                              steps=", ".join(map(str, self.steps))))


# ----------------------------------------------------------------------------- series.json, the one reader

@dataclass(frozen=True)
class Index:
    """A series folder's ``series.json``, checked (see docs/formats.md): every field typed, every path inside."""

    about: str = ""
    texts: Path | None = None          # the evaluation text, resolved inside the folder
    train_block: int | None = None
    rows: tuple = ()                   # one dict per checkpoint: "folder" (a step folder's name), "step" (or
                                       # absent), "tokens_seen", "val_loss", "train_loss", other plain fields


def read_index(root: Path) -> Index:
    """The index of the series folder ``root`` (an empty one when it has no ``series.json``); SeriesError in one
    line naming the file and the field otherwise."""
    f = Path(root) / SERIES_FILE
    if not files.exists(f):
        return Index()
    try:
        data = files.read_json(f, SERIES_JSON_MAX)
        if not isinstance(data, dict):
            raise _bad(f, "", msg("an object with a \"checkpoints\" list"), data)
        rows = data.get("checkpoints", [])
        if not isinstance(rows, list):
            raise _bad(f, "checkpoints", msg("a list of checkpoints"), rows)
        if len(rows) > MAX_MEMBERS:
            raise SeriesError(msg("{file}: at most {max} checkpoints, got {n}", file=files.shown(f),
                                  max=MAX_MEMBERS, n=len(rows)))
        checked = tuple(_row(f, root, k, r) for k, r in enumerate(rows))
        _unique_increasing(f, checked)
        return Index(_about(f, data.get("about")), _texts(f, root, data.get("texts")),
                     _block(f, data.get("train_block")), checked)
    except files.FileError as e:
        raise SeriesError(e.args[0]) from None


def read_texts(series: "Series") -> str | None:
    """The series' own evaluation text (``series.json`` "texts"), None without one; SeriesError when it cannot
    be read (not a regular file, larger than the cap, not UTF-8)."""
    if series.texts is None:
        return None
    try:
        return files.read_text(series.texts, TEXTS_MAX)
    except files.FileError as e:
        raise SeriesError(e.args[0]) from None


def _bad(f: Path, field: str, want, value) -> "SeriesError":
    where = msg("{file}: {field}", file=files.shown(f), field=field) if field else files.shown(f)
    return SeriesError(msg("{where} must be {want}, got {value}", where=where, want=want, value=files.short(value)))


def _about(f: Path, value) -> str:
    if value is not None and not isinstance(value, str):
        raise _bad(f, "about", msg("text"), value)
    return value or ""


def _texts(f: Path, root: Path, value) -> Path | None:
    if value is None:
        return None
    path = files.inside(root, value, f, "texts")
    if not files.exists(path):
        raise SeriesError(msg("{file}: texts = {value} is not a file in the series folder", file=files.shown(f),
                              value=files.short(value)))
    with files.open_regular(path):                  # a FIFO or device is refused here, before any work
        pass
    return path


def _block(f: Path, value) -> int | None:
    if value is None:
        return None
    n = whole_number(f, "train_block", value)
    if n < MIN_TRAIN_BLOCK:
        raise _bad(f, "train_block", msg("a whole number ≥ {low} (tokens)", low=MIN_TRAIN_BLOCK), value)
    return n


def whole_number(f: Path, field: str, value) -> int:
    """A JSON integer ≥ 0 of ``field`` in file ``f``; SeriesError saying what is wrong with anything else (text
    — other scripts' digits and decimal commas named as such —, a fraction, true/false, a negative number)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        why = (msg("use the digits 0-9 (ASCII), not other scripts' digits") if any(c.isdigit() and not c.isascii()
                                                                                  for c in value)
               else msg("a decimal comma: write a whole number") if "," in value
               else msg("a number is written without quotes"))
        raise SeriesError(msg("{file}: {field} = {value} is text; {why}", file=files.shown(f), field=field,
                              value=files.short(value), why=why))
    raise _bad(f, field, msg("a whole number ≥ 0"), value)


def _number(f: Path, field: str, value) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and "," in value:
        raise SeriesError(msg("{file}: {field} = {value} is text with a decimal comma; write a number such as 5.3",
                              file=files.shown(f), field=field, value=files.short(value)))
    raise _bad(f, field, msg("a finite number or null"), value)


def _row(f: Path, root: Path, k: int, row) -> dict:
    """One checkpoint of series.json, checked and typed."""
    at = f"checkpoints[{k}]"
    if not isinstance(row, dict):
        raise _bad(f, at, msg("an object with \"folder\" and \"step\""), row)
    folder = row.get("folder")
    if not isinstance(folder, str) or not _STEP_RE.match(folder):
        raise _bad(f, f"{at}.folder", msg("a step folder's name (step-000100)"), folder)
    files.inside(root, folder, f, f"{at}.folder")
    out = {"folder": folder}
    if "step" in row:
        out["step"] = whole_number(f, f"{at}.step", row["step"])
    if row.get("tokens_seen") is not None:
        out["tokens_seen"] = whole_number(f, f"{at}.tokens_seen", row["tokens_seen"])
    for key in ("val_loss", "train_loss"):
        if key in row:
            out[key] = _number(f, f"{at}.{key}", row[key])
    for key, value in row.items():
        if key not in out and key != "step":
            if isinstance(value, (list, dict)) or isinstance(value, float) and not math.isfinite(value):
                raise _bad(f, f"{at}.{key}", msg("a number, text, true/false or null"), value)
            out[key] = value
    return out


def _unique_increasing(f: Path, rows: tuple) -> None:
    seen: dict = {}
    for k, r in enumerate(rows):
        if r["folder"] in seen:
            raise SeriesError(msg("{file}: checkpoints[{k}] lists {folder} again (first at checkpoints[{j}])",
                                  file=files.shown(f), k=k, folder=r["folder"], j=seen[r["folder"]]))
        seen[r["folder"]] = k
    steps = [(k, r.get("step", _folder_step(r["folder"]))) for k, r in enumerate(rows)]
    for (j, a), (k, b) in zip(steps, steps[1:]):
        if b == a:
            raise SeriesError(msg("{file}: checkpoints[{k}] repeats step {b} of checkpoints[{j}]; list the checkpoints "
                                  "in training order, each step once", file=files.shown(f), k=k, b=b, j=j))
        if b < a:
            raise SeriesError(msg("{file}: checkpoints[{k}] has step {b}, below the {a} of checkpoints[{j}]; list the "
                                  "checkpoints in training order, each step once", file=files.shown(f), k=k, b=b,
                                  j=j, a=a))


def _folder_step(name: str) -> int:
    return int(_STEP_RE.match(name).group(1))


# ----------------------------------------------------------------------------- folders

def _step_folders(root: Path) -> list[Path]:
    """The step folders of ``root`` (``step-`` and ASCII digits); SeriesError for a ``step-`` entry with other
    digits, and for one that is a link out of the folder."""
    out = []
    for sub in sorted(root.iterdir()):
        if not sub.name.startswith("step-"):
            continue
        if not _STEP_RE.match(sub.name):
            raise SeriesError(msg("{folder}: {name} is not a step folder's name: a step is written in the digits "
                                  "0-9 (ASCII), e.g. step-000100", folder=files.shown(root), name=files.shown(sub.name)))
        if sub.is_dir():
            files.inside(root, sub.name, root, sub.name)
            out.append(sub)
        if len(out) > MAX_MEMBERS:
            raise SeriesError(msg("{folder}: at most {max} step folders", folder=files.shown(root), max=MAX_MEMBERS))
    return out


def _folder_series(name: str, root: Path) -> Series:
    if not root.is_dir():
        raise SeriesError(msg("series folder not found: {folder}", folder=files.shown(root)))
    index = read_index(root)
    try:
        subs = _step_folders(root)
    except files.FileError as e:
        raise SeriesError(e.args[0]) from None
    if not subs:
        raise SeriesError(msg("{folder} holds no step folders (step-000000/, step-000100/, …): not a series folder",
                              folder=files.shown(root)))
    rows = {r["folder"]: r for r in index.rows}
    missing = sorted(set(rows) - {s.name for s in subs})
    if missing:
        raise SeriesError(msg("{file} lists {folder}, which is not a folder there", file=files.shown(root / SERIES_FILE),
                              folder=missing[0]))
    members = [Member(rows.get(s.name, {}).get("step", _folder_step(s.name)), s.name, str(s.resolve()), s.resolve(),
                      dict(rows.get(s.name, {}))) for s in subs]
    members.sort(key=lambda m: m.step)
    for a, b in zip(members, members[1:]):
        if a.step == b.step:
            raise SeriesError(msg("{folder}: {a} and {b} are both step {step}; each step once", folder=files.shown(root),
                                  a=a.label, b=b.label, step=a.step))
    return Series(name, str(root.resolve()), members, index.about, index.texts, index.train_block)


# ----------------------------------------------------------------------------- hub revisions

def _revision_parts(rev: str) -> tuple[str, int] | None:
    """``step1000`` -> ("step", 1000); None for a revision that does not end in ASCII digits."""
    m = re.fullmatch(r"([^0-9]*?)([0-9]+)", rev, re.ASCII)
    return (m.group(1), int(m.group(2))) if m else None


def _ascii_digits(spec: str, rev: str) -> None:
    if any(c.isdigit() and not c.isascii() for c in rev):
        raise SeriesError(msg("{spec}: revision {rev} has digits other than 0-9 (ASCII); write the step in ASCII "
                              "digits", spec=repr(spec), rev=repr(rev)))


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
    m = re.fullmatch(r"(.+?)\.\.(.+?)/([0-9]+)", spec, re.ASCII)
    a, b = (_revision_parts(m.group(1)), _revision_parts(m.group(2))) if m else (None, None)
    if not m or a is None or b is None or a[0] != b[0] or a[1] >= b[1] or int(m.group(3)) < 2:
        raise SeriesError(msg("{spec}: write a range as REV0..REV1/N, e.g. step0..step143000/16 (same prefix, "
                              "REV0 < REV1, N ≥ 2, ASCII digits)", spec=repr(spec)))
    prefix, n = a[0], int(m.group(3))
    if n > MAX_MEMBERS:
        raise SeriesError(msg("{spec}: at most {max} checkpoints in a series", spec=repr(spec), max=MAX_MEMBERS))
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
        raise SeriesError(msg("{name}: give at least two revisions, e.g. {repo}@step0,step1000 or "
                              "{repo}@step0..step143000/16", name=repr(name), repo=repo))
    if len(set(revs)) != len(revs):
        raise SeriesError(msg("{name}: revision {rev} is listed twice", name=repr(name),
                              rev=repr(next(r for r in revs if revs.count(r) > 1))))
    members = []
    for k, rev in enumerate(revs):
        _ascii_digits(name, rev)
        full = f"{repo}@{rev}"
        split_revision(full)                                    # the one check of NAME@REVISION
        parts = _revision_parts(rev)
        members.append(Member(parts[1] if parts else k, rev, full, checkpoint.snapshot_folder(repo, rev)))
    steps = [m.step for m in members]
    if steps != sorted(steps):
        raise SeriesError(msg("{name}: list the revisions in training order (steps {steps})", name=repr(name),
                              steps=", ".join(map(str, steps))))
    return Series(name, repo, members)


def is_folder(spec: str) -> bool:
    """Whether ``spec`` names a folder on this machine (a path: it exists, or starts with ., ~ or /), not the
    shipped series or a hub model's revisions — what a link may name only with the user's confirmation."""
    spec = str(spec).strip()
    if not spec or spec in SHIPPED_SERIES:
        return False
    try:
        return spec.startswith((".", "~", "/")) or Path(spec).expanduser().exists()
    except (OSError, RuntimeError, ValueError):
        return True


def resolve(spec: str) -> Series:
    """The series named by ``spec`` (see the module docstring); SeriesError in one line when it is not one."""
    spec = str(spec).strip()
    if not spec:
        raise SeriesError(msg("no series given"))
    if spec in SHIPPED_SERIES:
        if not (SHIPPED_SERIES[spec] / SERIES_FILE).is_file():
            raise SeriesError(missing_shipped(spec, SHIPPED_SERIES[spec]))
        return _folder_series(spec, SHIPPED_SERIES[spec])
    if is_folder(spec):
        return _folder_series(spec, Path(spec).expanduser())
    if "@" not in spec:
        raise SeriesError(msg("{spec} is not a series: give {shipped}, a folder of step folders, or a hub model with "
                              "revisions (NAME@step0,step1000 or NAME@step0..step143000/16)", spec=repr(spec),
                              shipped=SHIPPED_SERIES_NAME))
    repo, _, revs = spec.rpartition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise SeriesError(msg("{spec}: a hub series is OWNER/NAME@REVISIONS, e.g. EleutherAI/pythia-70m@step0,step1000",
                              spec=repr(spec)))
    return _hub_series(spec, repo, revs)


# ----------------------------------------------------------------------------- consistency

def _config_of(m: Member) -> dict | None:
    """A checkpoint's config.json (bookkeeping fields left out); None where its files are not here or it is not a
    JSON object (loading it says why); SeriesError naming the file when it cannot be read as JSON."""
    if m.folder is None or not files.exists(m.folder / "config.json"):
        return None
    try:
        data = files.read_json(m.folder / "config.json", CONFIG_MAX)
    except files.FileError as e:
        raise SeriesError(e.args[0]) from None
    return {k: v for k, v in data.items() if k not in _FREE_FIELDS} if isinstance(data, dict) else None


def _tokenizer_digest(m: Member) -> str | None:
    if m.folder is None:
        return None
    h, seen = hashlib.sha256(), False
    for f in _TOKENIZER_FILES:
        p = m.folder / f
        if files.exists(p):
            try:
                h.update(f.encode() + b"\0" + files.read_bytes(p, TOKENIZER_MAX))
            except files.FileError as e:
                raise SeriesError(e.args[0]) from None
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
            raise SeriesError(msg("{series}: checkpoint {label} differs from {first} in its config: {key} = {value}, "
                                  "not {was}", series=series.name, label=m.label, first=first.label, key=key,
                                  value=_short(cfg.get(key)), was=_short(cfg0.get(key))))
        tok = _tokenizer_digest(m)
        if tok0 is not None and tok is not None and tok != tok0:
            raise SeriesError(msg("{series}: checkpoint {label} has another tokenizer than {first}", series=series.name,
                                  label=m.label, first=first.label))


def _short(v) -> str:
    return files.short(v) if v is not None else msg("(absent)")


def shape_of(config) -> tuple:
    """The fields of a loaded model's standard config (attnkit.standard.ModelConfig) a series must share."""
    return tuple((k, getattr(config, k, None)) for k in ("n_layers", "n_heads", "d_model", "d_head", "d_vocab", "n_ctx"))
