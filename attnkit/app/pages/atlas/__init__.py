"""Atlas: every head of the model over a corpus — where each head looks (its statistics, top examples, token pairs,
its queries and keys in 2-D) and what removing it does to the loss, with a verdict per role: does the role hold by
its pattern, by its effect, both or neither? A pattern is not a role."""
