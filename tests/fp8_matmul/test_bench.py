"""The benchmark's cases are the shapes the page describes, its inputs follow the case, and its peers
compute the product."""

from academy import DEVICE
from academy.bench.spec import Case
from academy.testing import assert_close

import pytest
import torch

from examples.fp8_matmul.bench import LAYOUTS, SPEC, cublas_bf16, scaled_mm


def test_every_case_is_a_square_or_a_models_projection():
    cases = list(SPEC.cases())
    assert {c.sweep for c in cases} == {
        "square block",
        "square row",
        "square tensor",
        "models block M=4096",
        "models row M=4096",
    }
    for case in cases:
        p = case.params
        assert case.metric == "compute" and case.dtype == torch.bfloat16 and case.mode == "fwd"
        if case.sweep.startswith("square"):
            assert p["M"] == p["N"] == p["K"] and 2048 <= p["K"] <= 8192
        else:
            assert p["M"] == 4096 and case.label
        assert LAYOUTS[p["layout"]] in case.sweep
    assert SPEC.sweep_names(["models"]) == ["models block M=4096", "models row M=4096"]


@pytest.mark.parametrize("layout", range(3))
def test_inputs_follow_the_case(layout):
    case = Case("square", "N", {"M": 40, "N": 136, "K": 200, "layout": layout}, torch.bfloat16, "fwd", "compute")
    a, a_scale, b, b_scale, a16, b16 = SPEC.make_inputs(case, DEVICE)
    assert a.dtype == b.dtype == torch.float8_e4m3fn and a.shape == (40, 200) and b.shape == (136, 200)
    assert a_scale.shape == [(40, 2), (40, 1), (1, 1)][layout]
    assert b_scale.shape == [(2, 2), (136, 1), (1, 1)][layout]
    ref = SPEC.reference(a, a_scale, b, b_scale, a16, b16)
    assert_close(cublas_bf16(a, a_scale, b, b_scale, a16, b16), ref.double(), dtype=torch.bfloat16)
    for name in ("academy", "academy:upcast", "academy:ungrouped"):
        assert_close(SPEC.providers[name]()(a, a_scale, b, b_scale, a16, b16), ref.double(), dtype=torch.bfloat16)


def test_scaled_mm_peer_where_torch_takes_it():
    case = Case("square", "N", {"M": 32, "N": 48, "K": 128, "layout": 1}, torch.bfloat16, "fwd", "compute")
    inputs = SPEC.make_inputs(case, DEVICE)
    try:
        y = scaled_mm(*inputs)
    except (RuntimeError, NotImplementedError) as err:  # no fp8 GEMM on this device or torch
        pytest.skip(f"torch._scaled_mm refuses here: {str(err).splitlines()[0]}")
    assert_close(y, SPEC.reference(*inputs).double(), dtype=torch.bfloat16)
