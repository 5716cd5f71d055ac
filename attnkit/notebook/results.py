"""What every analysis of the notebook API returns: a :class:`Result`.

A result holds the library's own result object (a ``PatchResult``, a ``Circuit``, …) and shows it three ways,
each in the language it was made in (``attnkit.load(..., lang="zh")``):

    res.to_pandas()       the table the dashboard's page downloads for it (a DataFrame)
    res.chart()           the Altair chart the page draws, from the same builder in ``attnkit.charts``
    res                   in Jupyter: its summary above the chart; printed: the summary
    res.save("x.html")    .html (self-contained: Vega's JavaScript inlined, opens offline), .png, .svg, .csv

Like CircuitsVis's renderers, a result is a value a notebook cell shows by ending with it; like the
dashboard, it says what it measured in its summary.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import pandas as pd

from .. import i18n

__all__ = ["Result", "save_chart", "FORMATS"]

#: What :meth:`Result.save` writes, by the file's suffix.
FORMATS = (".html", ".png", ".svg", ".csv")


def save_chart(chart: alt.TopLevelMixin, path: Path, scale: float = 2.0) -> Path:
    """Write ``chart`` to ``path``: .html with Vega's JavaScript inlined (Altair's ``inline=True``, the
    libraries from vl-convert: the file opens without a network), .png (``scale`` × its size) or .svg."""
    suffix = path.suffix.lower()
    if suffix == ".html":
        chart.save(str(path), inline=True)
    elif suffix == ".png":
        chart.save(str(path), scale_factor=scale)
    elif suffix == ".svg":
        chart.save(str(path))
    else:
        raise ValueError(f"cannot save a chart as {suffix or 'a file without a suffix'!r}; use .html, .png or .svg")
    return path


@dataclass
class Result:
    """The base of every notebook result: ``to_pandas()``, ``chart()``, ``save(path)``, and its display.

    A subclass defines ``_frame()`` (the table), ``_chart(**options)`` (the chart) and ``_summary()`` (one
    line, what was measured); the public methods run them in the result's language."""

    lang: str = field(default=i18n.DEFAULT, kw_only=True, repr=False)

    # -- what a subclass defines
    def _frame(self) -> pd.DataFrame:
        raise NotImplementedError

    def _chart(self, *args, **options) -> alt.TopLevelMixin:
        raise ValueError(f"{type(self).__name__} has no chart; see .to_pandas()")

    def _summary(self) -> str:
        return type(self).__name__

    # -- the public face
    def to_pandas(self) -> pd.DataFrame:
        """The result as a table (the numbers the chart draws, and more)."""
        with i18n.language(self.lang):
            return self._frame()

    def chart(self, *args, **options) -> alt.TopLevelMixin:
        """The dashboard's chart of this result (an Altair chart: display it, or ``.save`` it); the options are the
        subclass's (e.g. ``HeadStats.chart("induction")``)."""
        with i18n.language(self.lang):
            return self._chart(*args, **options)

    def summary(self) -> str:
        """One or two lines: what was measured, on what, and the headline numbers."""
        with i18n.language(self.lang):
            return str(self._summary())

    def save(self, path, **options) -> Path:
        """Write the chart (.html self-contained and offline, .png, .svg) or the table (.csv); returns the path.
        ``options`` go to :meth:`chart`."""
        path = Path(path).expanduser()
        if path.suffix.lower() == ".csv":
            self.to_pandas().to_csv(path, index=False)
            return path
        if path.suffix.lower() not in FORMATS:
            raise ValueError(f"cannot save as {path.suffix or 'a file without a suffix'!r}; use one of "
                             f"{', '.join(FORMATS)}")
        return save_chart(self.chart(**options), path)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, include=None, exclude=None):
        """Jupyter's display: the chart (Altair's own bundle, by its active renderer) with the summary as its plain
        text and, in HTML, above the chart."""
        text = {"text/plain": self.summary()}
        try:
            bundle = self.chart()._repr_mimebundle_(include, exclude)
        except ValueError:               # a result without a chart shows its summary
            return text
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        if "text/html" in data:                  # the summary above the chart, as text (tokens are escaped)
            data = {**data, "text/html": f"<p>{html.escape(text['text/plain'])}</p>\n{data['text/html']}"}
        return {**data, **text}, meta
