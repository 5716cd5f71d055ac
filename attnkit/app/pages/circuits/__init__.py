"""Circuits: how do heads in different layers work together? Composition scores, path patching, the discovered
circuit (beside the stated one on a planted model), with each long computation's cost said first."""
