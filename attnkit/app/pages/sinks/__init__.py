"""Attention sinks & KV cache: how much attention each head parks on the first tokens and what the sink writes, the
loss when the KV cache keeps only k sink tokens and a window of the w most recent (the rescue verdict), and
generation with such a cache beside the full one."""
