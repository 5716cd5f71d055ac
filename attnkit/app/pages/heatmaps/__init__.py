"""Heatmaps: where does each head look? One head's pattern (or pre-softmax scores), a layer's heads, a head
through the layers, the prompt coloured by attention, and why a query attends to a key."""
