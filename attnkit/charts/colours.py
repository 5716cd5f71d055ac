"""The heatmaps' colour schemes in one place: which Vega scheme each kind of matrix is drawn with, their anchor
colours (interpolated for the PNG images, so a picture matches its chart), and what their two ends look like in
words — the words a caption uses (:func:`colour_words`), never written into a caption by hand."""
from __future__ import annotations

import numpy as np

from ..i18n import msg

__all__ = ["SCHEMES", "ANCHORS", "SCHEME_ENDS", "colour_words", "lut"]

#: The scheme each kind of heatmap is drawn with (scores' "redblue" runs reversed: blue low, red high).
SCHEMES = {"pattern": "viridis", "scores": "redblue"}
#: Anchor colours of Vega's schemes, low → high, interpolated linearly in RGB for the PNG images.
ANCHORS = {"viridis": ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58",
                       "#b5de2b", "#fde725"],
           "redblue": ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582",
                       "#d6604d", "#b2182b", "#67001f"]}
#: What each scheme's two ends look like, low → high.
SCHEME_ENDS = {"viridis": (msg("dark purple"), msg("bright yellow")), "redblue": (msg("blue"), msg("red")),
               "blues": (msg("pale blue"), msg("dark blue")), "oranges": (msg("pale orange"), msg("dark orange"))}


def colour_words(kind: str) -> tuple[str, str]:
    """(the low end's colour, the high end's) of the scheme a heatmap of ``kind`` draws with, in words."""
    low, high = SCHEME_ENDS[SCHEMES[kind]]
    return str(low), str(high)


def lut(stops: list[str], n: int = 256) -> np.ndarray:
    """``n`` RGB colours [n, 3] (uint8) interpolated linearly between the anchor colours ``stops``."""
    rgb = np.array([[int(s[i : i + 2], 16) for i in (1, 3, 5)] for s in stops], dtype=np.float64)
    x = np.linspace(0, 1, len(stops))
    t = np.linspace(0, 1, n)
    return np.stack([np.interp(t, x, rgb[:, c]) for c in range(3)], 1).round().astype(np.uint8)
