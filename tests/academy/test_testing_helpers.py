"""The test helpers are code the whole suite trusts: each is checked on cases whose answer is known."""

import math

from academy.testing import (
    cancellation_tolerance,
    half_smallest_subnormal,
    rel_l2_error,
    tolerance,
    underflow_tolerance,
    unit_roundoff,
)

import pytest
import torch


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


def test_rounding_constants_are_the_ieee_ones():
    assert unit_roundoff(torch.float32) == 2.0**-24 and unit_roundoff(torch.bfloat16) == 2.0**-8
    assert half_smallest_subnormal(torch.float16) == 2.0**-25  # fp16's smallest subnormal is 2⁻²⁴


def test_underflow_tolerance_admits_one_subnormal_rounding_and_no_more():
    expected = torch.tensor([1.5 * 2.0**-24], dtype=torch.float64)  # a tie: fp16 rounds it to 2⁻²⁴ or 2⁻²³
    bar = underflow_tolerance(torch.float16, expected)
    assert rel_l2_error(torch.tensor([2.0**-23]), expected) <= bar  # the tie, 1/3 off
    assert rel_l2_error(torch.tensor([2.0**-22]), expected) > bar  # a real error
    normal = torch.ones(10, dtype=torch.float64)
    assert underflow_tolerance(torch.float16, normal) == pytest.approx(tolerance(torch.float16), rel=1e-5)
