"""Step by step: one head's formula with its real numbers, the seeds' worked examples (in Chinese on the
Chinese model), the softmax calculator, the next token, the KV cache, why W_Q ≠ W_K."""
