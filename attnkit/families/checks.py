"""Checks every family's ``validate(config)`` shares: a config attnkit cannot compute exactly is refused
at load, in one line naming the field (:class:`~attnkit.families.UnsupportedModel`).

They read a config by attribute, so they work on HF's config object and on the raw ``config.json`` (a
:func:`raw` namespace, read before HF builds its config; there a field that is absent is HF's default
and is skipped, to be checked on HF's object).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

from . import UnsupportedModel

__all__ = ["raw", "refuse", "finite", "count", "at_least", "divides", "rope", "window"]


def raw(data: dict) -> SimpleNamespace:
    """``config.json``'s fields as attributes (what validate reads before HF has built its config)."""
    return SimpleNamespace(**{str(k): v for k, v in data.items()})


def refuse(field: str, value, why: str):
    raise UnsupportedModel(f"config field {field}={value!r} {why}")


def _fields(cfg) -> dict:
    if hasattr(cfg, "to_dict"):
        return cfg.to_dict()
    return dict(vars(cfg))


def _walk(value, path: str):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, value


def finite(cfg) -> None:
    """Every number in the config is finite (NaN or ±Infinity in config.json would reach every result)."""
    for path, v in _walk(_fields(cfg), ""):
        if isinstance(v, float) and not math.isfinite(v):
            refuse(path, v, "is not a finite number; attnkit computes nothing from it")


def count(cfg, field: str, minimum: int = 1, what: str = "") -> int | None:
    """A whole number ≥ ``minimum`` (layers, heads, widths); None when the field is absent."""
    v = getattr(cfg, field, None)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if not (isinstance(v, float) and v.is_integer()):
            refuse(field, v, "is not a whole number")
        v = int(v)
    if v < minimum:
        refuse(field, v, f"is below {minimum}{': ' + what if what else ''}")
    return v


def at_least(cfg, field: str, minimum: float = 0.0, what: str = "") -> float | None:
    """A number ≥ ``minimum`` (a norm's ε: below 0 the square root of a negative variance is NaN)."""
    v = getattr(cfg, field, None)
    if v is None:
        return None
    if _number(field, v) < minimum:
        refuse(field, v, f"is below {minimum}{': ' + what if what else ''}")
    return float(v)


def divides(field: str, n: int | None, into: str, m: int | None, why: str = "") -> None:
    """``n`` divides ``m`` (heads into the width, key/value heads into heads); skipped if either is absent."""
    if n is None or m is None or not n:
        return
    if m % n:
        refuse(field, n, f"does not divide {into}={m}{'; ' + why if why else ''}")


def _number(field: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        refuse(field, v, "is not a number")
    return float(v)


def rope(p: dict, fraction_field: str | None = None) -> None:
    """Rotary parameters (``rope_parameters`` merged as in :func:`attnkit.families.llama.rope_parameters`):
    θ base > 0, a scaling factor > 0, and — for a family that rotates a fraction of each head, named in
    its config by ``fraction_field`` — a fraction in [0, 1]; a family that does not (None) refuses any
    fraction but 1."""
    theta = _number("rope_theta", p.get("rope_theta"))
    if theta <= 0:
        refuse("rope_theta", p.get("rope_theta"), "must be above 0 (the rotary frequencies are its powers)")
    if p.get("factor") is not None and _number("rope_parameters.factor", p["factor"]) <= 0:
        refuse("rope_parameters.factor", p["factor"], "must be above 0 (frequencies are divided by it)")
    prf = p.get("partial_rotary_factor")
    if prf is None:
        return
    prf = _number("partial_rotary_factor", prf)
    if fraction_field is None and prf != 1.0:
        refuse("partial_rotary_factor", p["partial_rotary_factor"],
               "is not honoured by HuggingFace's model for this family (it rotates the whole head), so attnkit "
               "refuses it rather than guess")
    if not 0.0 <= prf <= 1.0:
        refuse(fraction_field, p["partial_rotary_factor"], "must lie between 0 and 1 (a fraction of each head)")


def window(field: str, w, minimum: int = 1, why: str = "") -> None:
    """A local attention window: a whole number of at least ``minimum`` keys."""
    if w is None:
        return
    if isinstance(w, bool) or not isinstance(w, int):
        refuse(field, w, "is not a whole number of positions")
    if w < minimum:
        refuse(field, w, why or f"must be at least {minimum} (a query sees the last w keys)")
