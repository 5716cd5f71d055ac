"""Altair chart builders, one module per page family (no Streamlit here).

Large matrices (hundreds of tokens) are drawn as images or aggregates, never one mark per cell.
"""
