"""Fixtures and checks shared by the LayerNorm and RMSNorm tests: both chapters launch through
``examples/norms/launch.py``."""

from academy.bench.models import hidden_sizes
from academy.testing import poison_allocations

import pytest

from examples.norms import launch as norm_launch

WIDTHS = [1, 2, 3, 5, 33, 100, 127, 768, 896, 1000, 1025, 1600, 2304, 3001, 4864, 5120, 7168, 8192, 12288, 16384]
"""Row widths for the launch rule's checks: tiny rows, tails of one live column, model widths, powers of two."""

MODEL_WIDTHS = [shared.value for shared in hidden_sizes()]
"""The hidden sizes of the model zoo (academy.bench.models): the widths the norms' model sweep times."""


def norm_fixtures(kernel):
    """``(poison_outputs, path, set_limits)`` for the norm chapter whose kernel module is ``kernel``.

    The test module binds the two fixtures to module names (pytest collects them from
    there) and calls ``set_limits(monkeypatch, NAME=value, ...)`` directly.
    """

    @pytest.fixture(autouse=True, name="_poison_outputs")
    def poison_outputs(monkeypatch):
        poison_allocations(monkeypatch, kernel)
        poison_allocations(monkeypatch, norm_launch)

    @pytest.fixture(params=["fused", "wide"], name="path")
    def path(request, monkeypatch):
        """Run each test through both kernel families: shrinking the limits sends
        every row above 64 columns through the chunked kernels, in chunks of 128."""
        if request.param == "wide":
            monkeypatch.setattr(kernel, "MAX_FUSED_COLS", 64)
            for name, value in dict(
                FWD_MAX_FUSED_COLS=64, WIDE_BLOCK_N=128, WIDE_NUM_WARPS=1, COLUMNS_BLOCK_N=128, COLUMNS_NUM_WARPS=1
            ).items():
                monkeypatch.setattr(norm_launch, name, value)
        return request.param

    def set_limits(monkeypatch, **values):
        """Set launch constants where they live: the chapter's own limits or the shared rules."""
        for name, value in values.items():
            monkeypatch.setattr(kernel if hasattr(kernel, name) else norm_launch, name, value)

    return poison_outputs, path, set_limits


def whole_row_tile(n_cols: int, max_warps: int, max_fused_cols: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(HEAD, TAIL, BLOCK_M, num_warps) of the forward and of the backward that hold rows of
    ``n_cols`` in registers, for a chapter whose limits are ``max_warps`` (forward) and
    ``max_fused_cols`` (backward); fails if either would take its chunked kernels."""
    in_registers, _, forward = norm_launch.forward_launch(1000, n_cols, max_warps)
    design, _, backward = norm_launch.backward_launch(1000, n_cols, max_fused_cols)
    assert in_registers and design == "registers", (n_cols, in_registers, design)
    keys = ("HEAD", "TAIL", "BLOCK_M", "num_warps")
    return tuple(forward[k] for k in keys), tuple(backward[k] for k in keys)


def check_tile_config(n_cols: int, max_warps: int) -> None:
    """The launch rule for whole rows, as the pages state it: the row as HEAD + TAIL columns,
    both powers of two, HEAD the largest below ``n_cols`` (never masked) and TAIL the smallest
    that covers the rest; BLOCK_M the fewest rows (a power of two) that make
    MIN_ELEMENTS_PER_TILE values of HEAD + TAIL columns; the fewest warps (a power of two, at
    most ``max_warps``) that leave a thread at most VALUES_PER_THREAD values."""
    config = norm_launch.tile_config(n_cols, max_warps)
    head, tail, block_m, warps = (config[k] for k in ("HEAD", "TAIL", "BLOCK_M", "num_warps"))
    for value in (head, tail, block_m, warps):
        assert value >= 1 and value & (value - 1) == 0, config
    if n_cols == 1:
        assert (head, tail) == (1, 1)  # the tail holds no live column
    else:
        assert head < n_cols <= 2 * head and tail // 2 < n_cols - head <= tail, config
    width = head + tail
    assert block_m * width >= norm_launch.MIN_ELEMENTS_PER_TILE and (
        block_m == 1 or block_m // 2 * width < norm_launch.MIN_ELEMENTS_PER_TILE
    ), config
    per_thread = norm_launch.VALUES_PER_THREAD
    assert warps <= max_warps, config
    assert warps == max_warps or block_m * width <= warps * 32 * per_thread, config
    assert warps == 1 or block_m * width > warps // 2 * 32 * per_thread, config
