"""Ablations: are V, two projections, the 1/√d scaling and the mask needed? The seeds' claims measured, each
with its verdict."""
