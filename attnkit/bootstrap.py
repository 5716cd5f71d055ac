"""Ratio means over documents with percentile-bootstrap intervals, accumulated shard by shard.

The corpus summaries resample documents; the eviction lab (:mod:`attnkit.eviction`) resamples blocks of a long
text's tokens with the same class."""
from __future__ import annotations

import warnings

import numpy as np


class Boot:
    """Ratio means Σ num / Σ den over documents, with the same sums under B bootstrap resamplings of the
    documents (weights W [B, D]: how often each document is drawn), accumulated shard by shard so a
    corpus never has to be held at once."""

    def __init__(self, W, shape, dshape):
        self.W = W
        self.S, self.N = np.zeros(shape), np.zeros(dshape)
        B = 0 if W is None else W.shape[0]
        self.bS, self.bN = np.zeros((B, *shape)), np.zeros((B, *dshape))

    def add(self, d, S, N):
        """d [n] global document indices, S [n, *shape], N [n, *dshape]: per-document sums."""
        self.S += S.sum(0)
        self.N += N.sum(0)
        if self.W is not None and self.W.shape[0]:
            w = self.W[:, d]
            self.bS += (w @ S.reshape(len(d), -1)).reshape(self.bS.shape)
            self.bN += (w @ N.reshape(len(d), -1)).reshape(self.bN.shape)

    def result(self, level, num=None, bnum=None):
        """(mean, lo, hi) of Σ num / Σ den; ``num``/``bnum`` replace the accumulated numerators."""
        num = self.S if num is None else num
        bnum = self.bS if bnum is None else bnum
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = num / self.N
            if self.W is None or not self.W.shape[0]:
                nan = np.full(np.broadcast(mean).shape, np.nan)
                return mean, nan, nan.copy()
            est = bnum / self.bN
        q = (1 - level) / 2 * 100
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # all-NaN cells (no document there)
            lo, hi = np.nanpercentile(est, [q, 100 - q], axis=0)
        return mean, lo, hi
