"""A head's [T, T] matrix (pattern or pre-softmax scores) as a table to download, the same on every page that
exports one (Heatmaps, Compare heads): one row per cell, or the matrix itself with one row per query."""
from __future__ import annotations

import numpy as np
import pandas as pd

from attnkit.charts import heatmaps as heatmap_charts

__all__ = ["cell_rows", "matrix_rows"]


def cell_rows(values: np.ndarray, tokens: list[str], masked: np.ndarray, value: str = "weight", q0: int = 0,
              k0: int = 0) -> pd.DataFrame:
    """One row per cell of ``values``, the block at (``q0``, ``k0``) of the whole matrix: its positions, the
    value (the column ``value``: weight or score), whether the mask hides it, and the two tokens. ``masked``:
    the whole matrix's mask."""
    rows, cols = values.shape
    df = heatmap_charts.cells_frame(values, tokens, tokens, masked[q0 : q0 + rows, k0 : k0 + cols], q0, k0)
    return (df.assign(query_token=df.pop("query"), key_token=df.pop("key"))
              .rename(columns={"value": value}))


def matrix_rows(values: np.ndarray, tokens: list[str]) -> pd.DataFrame:
    """The matrix itself, one row per query: query_pos, query_token, k0 … k{T−1}."""
    df = pd.DataFrame(values, columns=[f"k{j}" for j in range(values.shape[1])])
    df.insert(0, "query_token", list(tokens[: values.shape[0]]))
    df.insert(0, "query_pos", range(values.shape[0]))
    return df
