"""Shared-memory bank conflicts: how many serial passes one warp's access needs.

Shared memory is 32 banks of 4 bytes; :func:`shared_access_ways` counts the
passes for any list of addresses, :func:`bank_conflict_ways` and
:func:`column_read_ways` for the strided and column reads the tutorial
discusses, with padding or an XOR :func:`swizzle`.
"""

from __future__ import annotations

from collections.abc import Sequence

from examples.gpu_model.specs import BANK_BYTES, SHARED_BANKS, WARP_SIZE


def shared_access_ways(byte_addresses: Sequence[int]) -> int:
    """Serial passes one warp's shared-memory access needs (1 means conflict-free).

    Each 4-byte word lives in bank ``(address // 4) % 32``. Threads that read
    the *same* word share one broadcast; *different* words in one bank are
    served one after another. The answer is the largest number of distinct
    words any bank is asked for.
    """
    if not byte_addresses:
        return 0
    words_per_bank: dict[int, set[int]] = {}
    for address in byte_addresses:
        word = address // BANK_BYTES
        words_per_bank.setdefault(word % SHARED_BANKS, set()).add(word)
    return max(len(words) for words in words_per_bank.values())


def bank_conflict_ways(stride_words: int) -> int:
    """Ways of the conflict when thread ``t`` of a warp reads 4-byte word ``t * stride_words``."""
    return shared_access_ways([t * stride_words * BANK_BYTES for t in range(WARP_SIZE)])


def swizzle(row: int, col: int) -> int:
    """Column where element ``(row, col)`` of a 32-word-wide tile is stored: ``col XOR row``."""
    return col ^ (row % SHARED_BANKS)


def column_read_ways(row_words: int = SHARED_BANKS, swizzled: bool = False, col: int = 0) -> int:
    """Ways of the conflict when a warp reads column ``col`` of a row-major fp32 tile.

    ``row_words`` is the stored row length in 4-byte words (32, or 33 with one
    word of padding); ``swizzled`` stores ``(r, c)`` at column ``c XOR r``.
    """
    cols = [swizzle(r, col) if swizzled else col for r in range(WARP_SIZE)]
    return shared_access_ways([(r * row_words + c) * BANK_BYTES for r, c in zip(range(WARP_SIZE), cols)])
