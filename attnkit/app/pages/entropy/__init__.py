"""Entropy: does attention spread out as the context grows (a seed's claim), measured over documents."""
