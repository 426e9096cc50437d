"""Fixtures shared by the LayerNorm and RMSNorm tests: both chapters launch through ``examples/norms/launch.py``."""

from academy.testing import poison_allocations

import pytest

from examples.norms import launch as norm_launch


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
