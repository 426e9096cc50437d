"""The Debugging tutorial's kernels behave as the page says, and its exercise answers are right."""

from academy import DEVICE, INTERPRETED
from academy.testing import IRREGULAR_SIZES, assert_close, poison_allocations, random_tensor, underflow_tolerance

import numpy as np
import pytest
import torch

from examples.debugging import answers as dbg


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, dbg)


# ---------------------------------------------------------------- the bugs the page shows


def test_guard_band_catches_the_missing_mask():
    bad = dbg.out_of_bounds_writes(lambda x, out: dbg.launch_copy(dbg.unmasked_copy_kernel, x, out), 1000)
    good = dbg.out_of_bounds_writes(lambda x, out: dbg.launch_copy(dbg.copy_kernel, x, out), 1000)
    assert bad == 24  # 16 programs × 64 lanes = 1024 elements written, 24 past the end
    assert good == 0


def test_wrong_other_breaks_a_max_of_negative_rows():
    x = -random_tensor((6, 37)).abs() - 0.5  # every element negative
    assert torch.equal(dbg.row_max(x, dbg.row_max_wrong_other_kernel), torch.zeros(6, device=DEVICE))
    assert torch.equal(dbg.row_max(x), x.max(dim=1).values)


def test_floor_grid_leaves_the_tail_unwritten():
    x = random_tensor(1000)
    out = torch.full_like(x, float("nan"))
    dbg.copy_floor_grid(x, out)
    assert out[:960].equal(x[:960]) and out[960:].isnan().all()


def test_aliasing_changes_the_answer_under_the_interpreter():
    x = random_tensor(300)
    expected = torch.diff(x, prepend=torch.zeros(1, device=DEVICE))
    assert_close(dbg.diff(x), expected)
    if INTERPRETED:  # programs run in order: program 1 reads what program 0 already overwrote
        inplace = x.clone()
        dbg.diff(inplace, out=inplace)
        assert not torch.allclose(inplace, expected)


@pytest.mark.skipif(not INTERPRETED, reason="interpreter behaviour")
def test_compile_time_checks_raise_under_the_interpreter():
    x, out = random_tensor(100), torch.empty(100, device=DEVICE)
    with pytest.raises(Exception, match="multiple of 16"):
        dbg.static_checks_kernel[(1,)](x, out, 100, BLOCK=24)
    with pytest.raises(Exception, match="tl.constexpr"):
        dbg.runtime_arange_kernel[(1,)](x, out, 64)
    with pytest.raises(Exception, match="power of 2"):
        dbg.copy_kernel[(1,)](x, out, 100, BLOCK=100)
    with pytest.raises(Exception, match="Unsupported ptr type"):
        dbg.copy_kernel[(2,)](x.data_ptr(), out, 100, BLOCK=64)


def test_int32_offsets_wrap():
    pid = np.array([2**21 - 1, 2**21], dtype=np.int32)
    offsets = pid * np.int32(1024)
    assert offsets[0] == 2**31 - 1024 and offsets[1] == -(2**31)


# ---------------------------------------------------------------- exercise answers


@pytest.mark.parametrize("n", IRREGULAR_SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_scale_matches_torch(n, dtype):
    x = random_tensor(n, dtype)
    expected = -1.5 * x.double()
    assert_close(dbg.scale(x, -1.5), expected, tol=underflow_tolerance(dtype, expected))


def test_scale_handles_strides_shapes_and_empty():
    x = random_tensor((33, 20)).t()  # not contiguous
    assert_close(dbg.scale(x, 3.0), 3.0 * x)
    assert dbg.scale(random_tensor(0), 2.0).numel() == 0
    x = random_tensor(500)
    before = x.clone()
    dbg.scale(x, 2.0)
    assert torch.equal(x, before)  # the input is never the output


def test_scale_writes_nothing_out_of_bounds():
    assert dbg.out_of_bounds_writes(lambda x, out: out.copy_(dbg.scale(x, 1.0)), 777) == 0


def test_scale_rejects_bad_input():
    with pytest.raises(TypeError, match="torch.Tensor"):
        dbg.scale(random_tensor(10).data_ptr(), 2.0)
    with pytest.raises(ValueError, match="power of two"):
        dbg.scale(random_tensor(10), 2.0, block=100)


@pytest.mark.parametrize("shape", [(1, 1), (5, 37), (9, 130), (3, 1000)])
def test_row_min_matches_torch(shape):
    x = random_tensor(shape) + 5.0  # mostly positive: 0.0 padding would win a min
    assert torch.equal(dbg.row_min(x), x.min(dim=1).values)


def test_row_min_strided_rows():
    x = random_tensor((10, 64))[::3, 5:50]
    assert torch.equal(dbg.row_min(x), x.min(dim=1).values)
    x = random_tensor((40, 7)).t()  # columns strided
    assert torch.equal(dbg.row_min(x), x.min(dim=1).values)


def test_row_min_rejects_bad_shapes():
    with pytest.raises(ValueError, match="2-D"):
        dbg.row_min(random_tensor(5))
    with pytest.raises(ValueError, match="at least one column"):
        dbg.row_min(random_tensor((3, 0)))


def test_out_of_bounds_writes_counts_exactly():
    def overshoot(x, out):  # writes 5 elements past the end through the underlying storage
        whole = out.as_strided((out.numel() + 5,), (1,))
        whole.copy_(torch.zeros(out.numel() + 5, device=out.device))

    assert dbg.out_of_bounds_writes(overshoot, 100) == 5
    assert dbg.out_of_bounds_writes(lambda x, out: out.copy_(x), 100) == 0
