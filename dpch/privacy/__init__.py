"""Typed privacy costs (pure ε, approximate (ε, δ), ρ-zCDP, ex-post), the named conversions
between them, and their composition. Mechanisms report their cost in these terms; filters
charge them."""
