"""The two files a planted-circuit model's folder carries, one reader each (docs/formats.md has the formats):

- ``CIRCUIT.json``, the circuit known by construction (:func:`read_circuit` -> :class:`StatedCircuit`): every field
  typed, every head and node name parsed by :mod:`attnkit.standard`, and — given the model's config — every head,
  MLP and node checked to exist in that model;
- ``MODEL_CARD.md``, what the model is (:func:`read_card` -> :class:`ModelCard`, plain text: bold and code marks
  dropped, never rendered as Markdown).

Both are read only as regular files within a size cap (:mod:`attnkit.files`: a FIFO card cannot hang a page);
anything wrong is a :class:`attnkit.files.FileError` (a ValueError) in one line, in the reader's language, naming
the file and the field. Core: imports only core modules.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import files
from .files import MB, FileError
from .i18n import msg
from .standard import NODE_INPUTS, head_name, node_name, parse_head, split_node

__all__ = ["CIRCUIT_FILE", "CARD_FILE", "TASKS", "EDGE_KINDS", "ROLE_LABELS", "DECOY_EFFECTS", "Decoy", "DecoyEdge",
           "StatedCircuit", "ModelCard", "read_circuit", "check_model", "read_card", "planted_folder"]

CIRCUIT_FILE = "CIRCUIT.json"
CARD_FILE = "MODEL_CARD.md"
#: The tasks a stated circuit's prompt pairs are built for (attnkit.calibration.make_pairs).
TASKS = ("induction", "successor")
#: What an edge is to the stated circuit (its ``kind``): ``required`` — the behaviour needs it (the default; what
#: discovery's recall counts); ``optional`` — part of the mechanism, not needed to reach it (a backup path);
#: ``negative`` — a suppressing path (it lowers the logit difference). Optional and negative edges are scored as
#: stated edges everywhere, except that discovery may leave them out without a miss.
EDGE_KINDS = ("required", "optional", "negative")
#: The roles a head statistic scores, as shown (a role in CIRCUIT.json is text; these two are the known ones).
ROLE_LABELS = {"previous token": msg("previous token"), "induction": msg("induction")}
#: Prompt pairs are 16 distinct random tokens: a circuit's vocabulary holds at least that many.
MIN_VOCAB = 16
CIRCUIT_MAX = 1 * MB
CARD_MAX = 1 * MB
_SENDERS = ("embed", "head", "mlp")
_RECEIVERS = (*NODE_INPUTS, "mlp", "logits")


@dataclass(frozen=True)
class Decoy:
    """A decoy head (CIRCUIT.json's ``decoys``): the head statistic its pattern scores high on (``pattern``, a name
    of :data:`attnkit.metrics.STATISTICS`), what removing it does (``effect``: none or negative), the planted head
    its pattern outranks (or None), and why (text)."""

    pattern: str
    effect: str = "none"
    outranks: str | None = None
    why: str = ""


@dataclass(frozen=True)
class DecoyEdge:
    """A decoy composition edge (CIRCUIT.json's ``decoy_edges``): sender → receiver, and the stated edge it ties
    with on the weights (``ties_with``: (sender, receiver))."""

    sender: str
    receiver: str
    ties_with: tuple


@dataclass(frozen=True)
class StatedCircuit:
    """A CIRCUIT.json, checked: heads (``L{l}H{h}``), edges (sender, receiver) as path patching names them
    (:func:`attnkit.standard.node_name`), each head's role, the task its prompt pairs test, the successor task's
    shift, the vocabulary the pairs draw from, what the metric is (text), the kind of each edge that is not
    ``required`` (:data:`EDGE_KINDS`; ``kinds``: edge -> kind), and — on a model built to fool pattern-based
    methods — its decoy heads, decoy edges and sink heads (docs/formats.md)."""

    heads: tuple
    edges: tuple
    roles: dict = field(default_factory=dict, hash=False)
    task: str = "induction"
    shift: int = 0
    vocab: int = 40
    metric: str = ""
    kinds: dict = field(default_factory=dict, hash=False)
    decoys: dict = field(default_factory=dict, hash=False)
    decoy_edges: tuple = ()
    sinks: tuple = ()

    def kind(self, edge: tuple) -> str:
        """``required``, ``optional`` or ``negative``."""
        return self.kinds.get(tuple(edge), "required")

    @property
    def required(self) -> tuple:
        """The edges the behaviour needs (what discovery's recall counts)."""
        return tuple(e for e in self.edges if self.kind(e) == "required")

    @property
    def optional(self) -> tuple:
        """The stated edges that are not required (optional or negative)."""
        return tuple(e for e in self.edges if self.kind(e) != "required")


@dataclass(frozen=True)
class ModelCard:
    """A MODEL_CARD.md as plain text: its title, first paragraph, bullets as (label, text) ("Family: …" ->
    ("Family", "…"); ("", text) without a label) and the whole text. All empty for a folder without a card."""

    title: str = ""
    summary: str = ""
    facts: tuple = ()
    text: str = ""


# ----------------------------------------------------------------------------- CIRCUIT.json

def read_circuit(folder, config=None) -> StatedCircuit:
    """The stated circuit of ``folder``; with ``config`` (a standard ModelConfig) checked against that model too.
    FileError in one line naming the file and the field when absent, unreadable or malformed."""
    path = Path(folder) / CIRCUIT_FILE
    data = files.read_json(path, CIRCUIT_MAX)
    if not isinstance(data, dict):
        raise _bad(path, "", msg("an object with \"heads\" and \"edges\""), data)
    heads = tuple(_head(path, f"heads[{k}]", h) for k, h in enumerate(_list(path, "heads", data.get("heads"))))
    raw = _list(path, "edges", data.get("edges"))
    edges = tuple(_edge(path, k, e) for k, e in enumerate(raw))
    _once(path, "heads", heads)
    _once(path, "edges", [f"{s} → {r}" for s, r in edges])
    kinds = {e: kind for e, kind in zip(edges, (_kind(path, k, v) for k, v in enumerate(raw))) if kind != "required"}
    if len(kinds) == len(edges):
        raise FileError(msg("{file}: edges: at least one edge must be required (every edge is optional or negative)",
                            file=files.shown(path)))
    circuit = StatedCircuit(heads, edges, _roles(path, data.get("roles", {}), heads), _task(path, data.get("task")),
                            _int(path, "shift", data.get("shift", 0), None), _int(path, "vocab", data.get("vocab", 40),
                                                                                  MIN_VOCAB),
                            _text(path, "metric", data.get("metric", "")), kinds, _decoys(path, data.get("decoys", {}), heads),
                            _decoy_edges(path, data.get("decoy_edges", []), edges),
                            tuple(_head(path, f"sinks[{k}]", h) for k, h in enumerate(_seq(path, "sinks",
                                                                                              data.get("sinks", [])))))
    if config is not None:
        check_model(circuit, config, path)
    return circuit


def check_model(circuit: StatedCircuit, config, path="CIRCUIT.json") -> None:
    """FileError naming every head (and MLP) of ``circuit`` that the model of ``config`` lacks, or a vocabulary
    larger than the model's."""
    nodes = [*circuit.heads, *(n for e in circuit.edges for n in e), *circuit.decoys, *circuit.sinks,
             *(n for d in circuit.decoy_edges for n in (d.sender, d.receiver))]
    lacking = []
    for name in dict.fromkeys(nodes):
        node = split_node(name)
        layer_ok = len(node) < 2 or 0 <= node[1] < config.n_layers
        head_ok = len(node) < 3 or 0 <= node[2] < config.n_heads
        if not (layer_ok and head_ok):
            lacking.append(name)
    if lacking:
        raise FileError(msg("{file} names {nodes}, which this model lacks (it has layers 0…{last_layer} and heads "
                            "0…{last_head})", file=files.shown(path), nodes=", ".join(lacking),
                            last_layer=config.n_layers - 1, last_head=config.n_heads - 1))
    if circuit.vocab > config.d_vocab:
        raise FileError(msg("{file}: vocab = {vocab} is larger than the model's vocabulary ({n} tokens)",
                            file=files.shown(path), vocab=circuit.vocab, n=config.d_vocab))


def _bad(path, field_: str, want, value) -> FileError:
    where = msg("{file}: {field}", file=files.shown(path), field=field_) if field_ else files.shown(path)
    return FileError(msg("{where} must be {want}, got {value}", where=where, want=want, value=files.short(value)))


def _list(path, name: str, value) -> list:
    if not isinstance(value, list) or not value:
        raise _bad(path, name, msg("a non-empty list"), value)
    return value


def _head(path, where: str, value) -> str:
    try:
        return head_name(*parse_head(value if isinstance(value, str) else ""))
    except ValueError:
        raise _bad(path, where, msg("a head name such as L1H0"), value) from None


def _edge(path, k: int, value, where: str = "edges") -> tuple:
    """One edge: {"sender": embed | L{l}H{h} | MLP{l}, "receiver": L{l}H{h}.q/.k/.v | MLP{l} | logits}."""
    where = f"{where}[{k}]" if where in ("edges", "decoy_edges") else where
    if not isinstance(value, dict):
        raise _bad(path, where, msg("an object with \"sender\" and \"receiver\""), value)
    out = []
    for side, kinds, want in (("sender", _SENDERS, msg("embed, L{l}H{h} or MLP{l}")),
                              ("receiver", _RECEIVERS, msg("L{l}H{h}.q/.k/.v, MLP{l} or logits"))):
        name = value.get(side)
        try:
            node = split_node(name) if isinstance(name, str) else (None,)
        except ValueError:
            node = (None,)
        if node[0] not in kinds:
            raise _bad(path, f"{where}.{side}", want, name)
        out.append(node_name(node))
    return tuple(out)


def _kind(path, k: int, value: dict) -> str:
    """An edge's ``kind`` (:data:`EDGE_KINDS`; ``required`` when absent)."""
    kind = value.get("kind", "required")
    if kind not in EDGE_KINDS:
        raise _bad(path, f"edges[{k}].kind", msg("one of {kinds}", kinds=", ".join(EDGE_KINDS)), kind)
    return kind


def _once(path, name: str, items) -> None:
    seen = set()
    for k, item in enumerate(items):
        if item in seen:
            raise FileError(msg("{file}: {field}[{k}] repeats {item}", file=files.shown(path), field=name, k=k,
                                item=item))
        seen.add(item)


def _roles(path, value, heads: tuple) -> dict:
    if not isinstance(value, dict):
        raise _bad(path, "roles", msg("an object head -> role"), value)
    for head, role in value.items():
        if head not in heads:
            raise FileError(msg("{file}: roles names {head}, which is not in heads", file=files.shown(path),
                                head=files.short(head)))
        if not isinstance(role, str):
            raise _bad(path, f"roles.{head}", msg("text"), role)
    return dict(value)


def _seq(path, name: str, value) -> list:
    if not isinstance(value, list):
        raise _bad(path, name, msg("a list"), value)
    return value


#: What removing a decoy does, as CIRCUIT.json states it.
DECOY_EFFECTS = ("none", "negative")


def _decoys(path, value, heads: tuple) -> dict:
    """``decoys``: {head: {"pattern": statistic, "effect": none | negative, "outranks": head | null, "why": text}}."""
    if not isinstance(value, dict):
        raise _bad(path, "decoys", msg("an object head -> decoy"), value)
    out = {}
    for k, (head, d) in enumerate(value.items()):
        name = _head(path, f"decoys[{k}]", head)
        if name in heads:
            raise FileError(msg("{file}: decoys names {head}, which is a stated head", file=files.shown(path),
                                head=name))
        if not isinstance(d, dict) or not isinstance(d.get("pattern"), str):
            raise _bad(path, f"decoys.{name}", msg("an object with \"pattern\" (a head statistic)"), d)
        effect = d.get("effect", "none")
        if effect not in DECOY_EFFECTS:
            raise _bad(path, f"decoys.{name}.effect", msg("one of {kinds}", kinds=", ".join(DECOY_EFFECTS)), effect)
        outranks = d.get("outranks")
        if outranks is not None and _head(path, f"decoys.{name}.outranks", outranks) not in heads:
            raise FileError(msg("{file}: decoys.{head}.outranks names {other}, which is not in heads",
                                file=files.shown(path), head=name, other=files.short(outranks)))
        out[name] = Decoy(d["pattern"], effect, outranks, _text(path, f"decoys.{name}.why", d.get("why", "")))
    return out


def _decoy_edges(path, value, edges: tuple) -> tuple:
    """``decoy_edges``: [{"sender", "receiver", "ties_with": {"sender", "receiver"} (a stated edge)}]."""
    out = []
    for k, d in enumerate(_seq(path, "decoy_edges", value)):
        s, r = _edge(path, k, d, "decoy_edges")
        tie = _edge(path, k, d.get("ties_with"), f"decoy_edges[{k}].ties_with")
        if tie not in edges:
            raise FileError(msg("{file}: decoy_edges[{k}].ties_with names {edge}, which is not a stated edge",
                                file=files.shown(path), k=k, edge=f"{tie[0]} → {tie[1]}"))
        out.append(DecoyEdge(s, r, tie))
    return tuple(out)


def _task(path, value) -> str:
    value = "induction" if value is None else value
    if value not in TASKS:
        raise _bad(path, "task", msg("one of {tasks}", tasks=", ".join(TASKS)), value)
    return value


def _int(path, name: str, value, low: int | None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or (low is not None and value < low):
        want = msg("a whole number") if low is None else msg("a whole number ≥ {low}", low=low)
        raise _bad(path, name, want, value)
    return value


def _text(path, name: str, value) -> str:
    if not isinstance(value, str):
        raise _bad(path, name, msg("text"), value)
    return value


# ----------------------------------------------------------------------------- MODEL_CARD.md

_MD_MARKS = re.compile(r"\*\*|`")


def read_card(folder) -> ModelCard:
    """``folder``'s MODEL_CARD.md as plain text (an empty card when there is none); FileError when it is there
    but not a regular UTF-8 file within the cap."""
    path = Path(folder) / CARD_FILE
    if not files.exists(path):
        return ModelCard()
    text = _MD_MARKS.sub("", files.read_text(path, CARD_MAX))
    title, paragraphs, facts = "", [], []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        if lines and lines[0].startswith("#"):
            title, lines = lines[0].lstrip("#").strip(), lines[1:]
        bullets = _bullets(lines)
        for b in bullets:
            label, sep, rest = b.partition(": ")
            facts.append((label, rest) if sep and len(label) < 40 else ("", b))
        if lines and not bullets:
            paragraphs.append(" ".join(lines))
    return ModelCard(title, paragraphs[0] if paragraphs else "", tuple(facts), text)


def _bullets(lines: list[str]) -> list[str]:
    """A block's bullets ("- …"), a bullet's continuation lines joined to it; [] for a block that is not a list."""
    out: list[str] = []
    for ln in lines if lines and lines[0].startswith("- ") else []:
        if ln.startswith("- "):
            out.append(ln[2:])
        else:
            out[-1] += " " + ln
    return out


def planted_folder(source) -> Path | None:
    """The folder of a loaded model (``Loaded.source``) when it states a circuit (holds a CIRCUIT.json, which
    :func:`read_circuit` then reads or refuses), else None (a hub repository, or a folder without one)."""
    folder = Path(str(source)).expanduser()
    return folder if files.exists(folder / CIRCUIT_FILE) else None
