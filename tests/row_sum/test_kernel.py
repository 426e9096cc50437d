"""row_sum: against float64 PyTorch on fresh random inputs, through one tile and through the tile loop."""

from academy import DEVICE, INTERPRETED
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.row_sum import kernel
from examples.row_sum.kernel import launch_config, reference, row_sum

SHAPES = [(1, 1), (3, 7), (5, 127), (33, 1000), (4, 1025), (2, 3001)]


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, kernel)


@pytest.fixture(params=["one tile", "tile loop"])
def tiles(request, monkeypatch):
    """Run each test twice: with the real tile width (rows here fit in one
    tile), and with 64-wide tiles, so every row above 64 columns loops."""
    if request.param == "tile loop":
        monkeypatch.setattr(kernel, "MAX_BLOCK_N", 64)
    return request.param


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_matches_float64(shape, dtype, tiles):
    x = random_tensor(shape, dtype, offset=0.5)  # a nonzero mean: sums grow with the width
    out = row_sum(x)
    assert out.dtype == dtype and out.shape == (shape[0],)
    assert_close(out, x.double().sum(-1), dtype=dtype, baseline=x.sum(-1), name="row sums")


def test_matches_the_reference_exactly_in_fp32_terms(tiles):
    """fp32 accumulation: the result agrees with PyTorch's fp32 sum to fp32 rounding."""
    x = random_tensor((9, 2500))
    assert_close(row_sum(x), reference(x), tol=1e-6)


def test_many_tiles_stay_accurate(monkeypatch):
    """A long row through a narrow tile: 300 tiles, each lane adding 300 values."""
    monkeypatch.setattr(kernel, "MAX_BLOCK_N", 64)
    x = random_tensor((2, 64 * 300 - 5), offset=1.0)
    assert launch_config(x.shape[1])["BLOCK_N"] == 64
    assert_close(row_sum(x), x.double().sum(-1), tol=1e-6)


def test_strided_rows(tiles):
    base = random_tensor((20, 300))
    x = base[::3, 7:207]  # row stride 900, columns adjacent
    assert_close(row_sum(x), x.double().sum(-1), dtype=torch.float32)


def test_empty_shapes():
    assert row_sum(torch.empty(0, 5, device=DEVICE)).shape == (0,)
    out = row_sum(torch.empty(3, 0, device=DEVICE))
    assert torch.equal(out, torch.zeros(3, device=DEVICE))


def test_launch_config_caps_the_tile():
    assert launch_config(100) == {"BLOCK_N": 128, "num_warps": 1}
    assert launch_config(3000)["BLOCK_N"] == 4096
    assert launch_config(10**6) == {"BLOCK_N": kernel.MAX_BLOCK_N, "num_warps": 8}


@pytest.mark.parametrize(
    "x, error, message",
    [
        (lambda: [1.0, 2.0], TypeError, "torch.Tensor"),
        (lambda: random_tensor(10), ValueError, "2-D"),
        (lambda: random_tensor((2, 3, 4)), ValueError, "2-D"),
        (lambda: random_tensor((4, 5), torch.float64), TypeError, "supported"),
        (lambda: random_tensor((4, 5), torch.int32), TypeError, "supported"),
        (lambda: random_tensor((8, 9)).t(), ValueError, "stride 1"),
    ],
)
def test_bad_input_raises_clear_error(x, error, message):
    with pytest.raises(error, match=message):
        row_sum(x())


def test_inputs_that_require_grad_are_refused():
    """row_sum has no backward: its result would carry no gradient, and the graph would be cut silently."""
    x = random_tensor((3, 50), requires_grad=True)
    with pytest.raises(ValueError, match="row_sum is forward only .* x requires grad"):
        row_sum(x)
    with torch.no_grad():
        assert_close(row_sum(x), x.detach().double().sum(-1))


@pytest.mark.skipif(DEVICE != "cuda", reason="a CPU tensor is the right device under the interpreter")
def test_wrong_device_raises():
    with pytest.raises(ValueError, match="kernels run on"):
        row_sum(torch.ones(2, 4))


@pytest.mark.skipif(INTERPRETED, reason="2**31 + elements; the interpreter would take hours")
def test_offsets_beyond_int32():
    n_rows, n_cols = 2**16 + 3, 2**15 + 2**8  # the last rows start past 2**31 elements
    # 33024 = 2**15 · (1 + 2**-7) is exact in bf16, so every sum can be compared exactly
    x = torch.ones(n_rows, n_cols, dtype=torch.bfloat16, device=DEVICE)
    out = row_sum(x)
    assert (out == float(n_cols)).all()
