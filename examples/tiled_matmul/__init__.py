"""Tiled matrix multiplication: the Learn-track tutorial's kernel (grouped tiles, K loop, fused epilogue)."""
