"""Compare heads: which heads do what? Every head coloured by a statistic, heads side by side, which heads
link two tokens, which heads attend alike."""
