"""Coalescing: how many 128-byte memory segments one warp's global load touches."""

from __future__ import annotations

from examples.gpu_model.specs import WARP_SIZE

SEGMENT_BYTES = 128
"""A warp's global-memory request is served in 128-byte lines (four 32-byte sectors)."""


def transactions_per_warp(stride_bytes: int, element_bytes: int = 4, offset_bytes: int = 0) -> int:
    """128-byte segments touched when thread ``t`` loads ``element_bytes`` at ``offset + t * stride``."""
    segments = set()
    for t in range(WARP_SIZE):
        start = offset_bytes + t * stride_bytes
        segments.update(range(start // SEGMENT_BYTES, (start + element_bytes - 1) // SEGMENT_BYTES + 1))
    return len(segments)


def load_efficiency(stride_bytes: int, element_bytes: int = 4, offset_bytes: int = 0) -> float:
    """Bytes the warp asked for over bytes the memory system moved."""
    moved = transactions_per_warp(stride_bytes, element_bytes, offset_bytes) * SEGMENT_BYTES
    return WARP_SIZE * element_bytes / moved
