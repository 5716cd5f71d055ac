"""Training: how does attention learn? A series of checkpoints: head scores and the ICL score over steps, the
induction phase change, a head's pattern step by step, any checkpoint opened on the other pages."""
