"""Search: a question routed to levels, searched hybrid and fused; the stems keyword
search reads, and which sources a typed name selects."""
