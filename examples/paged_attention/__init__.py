"""Paged decode attention: one new query per sequence against a KV cache stored in fixed-size pages (inference only)."""
