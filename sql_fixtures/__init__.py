"""Fixtures: annotated demo schemas, deterministic data generators, and the query corpus."""
