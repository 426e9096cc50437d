"""The test helpers are code the whole suite trusts: each is checked on cases whose answer is known."""

import math

import pytest
import torch

from academy.testing import cancellation_tolerance, rel_l2_error, tolerance


def test_cancellation_tolerance_is_the_dtypes_bar_without_cancellation():
    terms = torch.rand(100, dtype=torch.float64) + 0.5  # all positive: the sum of them cannot cancel
    assert cancellation_tolerance(torch.bfloat16, terms, terms) == tolerance(torch.bfloat16)


def test_cancellation_tolerance_grows_with_the_cancellation():
    big = torch.full((4,), 1000.0, dtype=torch.float64)
    remainder = torch.full((4,), 1.0, dtype=torch.float64)  # 1000 + 1 − 1000: terms 2001, result 1
    bar = cancellation_tolerance(torch.float32, 2 * big + remainder, remainder)
    assert bar == pytest.approx(tolerance(torch.float32) * 2001)
    assert cancellation_tolerance(torch.float32, big, torch.zeros(4, dtype=torch.float64)) == tolerance(torch.float32)


def test_rel_l2_error_never_passes_nan():
    ref = torch.ones(3)
    assert rel_l2_error(ref, ref) == 0.0
    assert math.isnan(rel_l2_error(torch.tensor([1.0, float("nan"), 1.0]), ref))
