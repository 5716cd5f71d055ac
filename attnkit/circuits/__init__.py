"""Circuits across layers: how heads compose (weights), path patching, attribution patching and
automatic circuit discovery checked by ablation. An analyses package: imports only core and analyses.

    compose                 prompt-free Q/K/V-composition scores, random baseline, per-head OV/QK scores
    path                    path patching: one sender's output into one receiver's q, k, v, MLP or logits input
    attribution_patching    gradient × activation difference for heads and for edges, beside exact patching
    discover                top edges by edge attribution until the circuit run recovers a share of the LD
"""
