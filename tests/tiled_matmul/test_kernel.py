"""tiled_matmul: the kernel against float64 PyTorch, the tile map against its Python twin.

Tolerances (CONVENTIONS §6): fp32 with ``input_precision="ieee"`` (the
launcher's default) ≲ 1e-5; fp16/bf16 ≲ 1e-2. TF32 is tested on its own
against an emulation of TF32 rounding. bf16 ``tl.dot`` is wrong under the
interpreter, so there the kernel multiplies its bf16 tiles in fp32.
"""

import xml.etree.ElementTree as ET

from academy import DEVICE, INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import numpy as np
import pytest
import torch

from examples.tiled_matmul import kernel
from examples.tiled_matmul.kernel import (
    apply_activation,
    grouping_svg,
    kernel_tile_map,
    matmul,
    panels_read,
    reference,
    tile_coordinates,
    to_tf32,
)

SMALL_TILES = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]  # bf16 tiles are multiplied in fp32 under the interpreter


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, kernel)


def _expected(a, b, activation=None):
    return apply_activation(a.double() @ b.double(), activation)


def _baseline(a, b, activation=None):
    """PyTorch in the inputs' own dtype: the bar rises to twice its error when larger."""
    return reference(a, b, activation)


# ---------------------------------------------------------------- correctness


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 3), (33, 47, 70), (64, 64, 64), (17, 80, 129)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ragged_shapes(shape, dtype):
    """Shapes that are not multiples of the 16×16×16 tiles: every mask is exercised."""
    M, N, K = shape
    a, b = random_tensor((M, K), dtype), random_tensor((K, N), dtype)
    c = matmul(a, b, config=SMALL_TILES)
    assert c.shape == (M, N) and c.dtype == dtype
    assert_close(c, _expected(a, b), dtype=dtype, baseline=_baseline(a, b))


@pytest.mark.parametrize("shape", [(32, 32, 32), (256, 512, 128), (1024, 1024, 1024)], ids=str)
def test_tutorial_sizes_fp16(shape):
    """The sizes the upstream tutorial checks, at the launcher's own tile shape."""
    M, N, K = shape
    if INTERPRETED and M * N * K > 2**25:
        pytest.skip("1024³ takes minutes under the interpreter; the GPU run covers it")
    a, b = random_tensor((M, K), torch.float16), random_tensor((K, N), torch.float16)
    config = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64} if INTERPRETED else None  # fewer programs on the CPU
    assert_close(matmul(a, b, config=config), _expected(a, b), dtype=torch.float16)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_transposed_and_strided_inputs(dtype):
    """Strides are in elements and may be anything: a transposed A, a sliced B."""
    a = random_tensor((70, 45), dtype).t()  # (45, 70), strides (1, 45)
    b = random_tensor((140, 99), dtype)[::2, 1::3]  # (70, 33), strides (198, 3)
    assert a.stride() == (1, 45) and b.stride() == (198, 3)
    c = matmul(a, b, config=SMALL_TILES)
    assert_close(c, _expected(a, b), dtype=dtype, baseline=_baseline(a, b))


@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_epilogues(activation, dtype):
    a, b = random_tensor((40, 50), dtype), random_tensor((50, 36), dtype)
    c = matmul(a, b, activation=activation, config=SMALL_TILES)
    expected = _expected(a, b, activation)
    assert_close(c, expected, dtype=dtype, baseline=_baseline(a, b, activation))
    if activation == "relu":
        assert (c >= 0).all()
    else:  # negative outputs are kept, scaled by 0.01
        assert (c < 0).any() and torch.equal(c < 0, expected < 0)


@pytest.mark.parametrize("group_size_m", [1, 2, 3, 8, 100])
def test_grouping_changes_the_order_not_the_result(group_size_m):
    a, b = random_tensor((70, 20)), random_tensor((20, 40))
    c = matmul(a, b, group_size_m=group_size_m, config=SMALL_TILES)
    assert_close(c, _expected(a, b), dtype=torch.float32)


def test_bf16_under_the_interpreter_is_right():
    """The interpreter's bf16 tl.dot is wrong (contributing.md): the kernel upcasts its tiles there,
    as the matmul chapter's kernels do, instead of returning garbage."""
    a, b = random_tensor((40, 32), torch.bfloat16), random_tensor((32, 24), torch.bfloat16)
    assert_close(matmul(a, b), _expected(a, b), dtype=torch.bfloat16, baseline=_baseline(a, b))


def test_inputs_that_require_grad_are_refused():
    """matmul has no backward: its result would carry no gradient, and the graph would be cut silently."""
    a, b = random_tensor((8, 16), requires_grad=True), random_tensor((16, 8))
    with pytest.raises(ValueError, match="matmul is forward only .* a requires grad"):
        matmul(a, b)
    with torch.no_grad():
        assert_close(matmul(a, b, config=SMALL_TILES), _expected(a.detach(), b), dtype=torch.float32)


def test_numpy_group_size_and_config_values_are_accepted():
    a, b = random_tensor((40, 20)), random_tensor((20, 36))
    c = matmul(a, b, group_size_m=np.int64(3), config={name: np.int32(16) for name in SMALL_TILES})
    assert_close(c, _expected(a, b), dtype=torch.float32)


def test_empty_and_zero_k():
    a, b = random_tensor((0, 5)), random_tensor((5, 3))
    assert matmul(a, b).shape == (0, 3)
    c = matmul(random_tensor((4, 0)), random_tensor((0, 6)), activation="relu")
    assert torch.equal(c, torch.zeros(4, 6, device=DEVICE))


# ---------------------------------------------------------------- TF32


def test_tf32_rounding_emulation():
    x = torch.tensor([1 + 2**-11, 1 + 2**-10 + 2**-12, -(1 + 3 * 2**-12), 3.0, 2**-130])
    assert to_tf32(x).tolist() == [1 + 2**-10, 1 + 2**-10, -(1 + 2**-10), 3.0, 2**-130]
    assert to_tf32(x, "truncate").tolist() == [1.0, 1 + 2**-10, -1.0, 3.0, 2**-130]
    with pytest.raises(TypeError, match="fp32"):
        to_tf32(x.double())


def test_tf32_inputs_lose_about_four_decimal_digits():
    """The TF32 trap, on the CPU: inputs rounded to 10 mantissa bits (2¹³ coarser than fp32) leave an error far
    above the fp32 bar of 1e-5."""
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    exact = a.double() @ b.double()
    for rounding, low, high in (("nearest", 1e-4, 6e-4), ("truncate", 3e-4, 1.5e-3)):
        emulated = to_tf32(a, rounding).double() @ to_tf32(b, rounding).double()
        error = ((emulated - exact).norm() / exact.norm()).item()
        assert low < error < high, (rounding, error)


@pytest.mark.skipif(INTERPRETED, reason="the interpreter multiplies fp32 exactly whatever input_precision says")
def test_tf32_on_the_gpu_is_as_wrong_as_tf32_should_be():
    """input_precision="tf32" (Triton's default): held to the error of truncating
    emulated TF32 (the worse of the two roundings), not to the fp32 bar."""
    a, b = random_tensor((512, 512)), random_tensor((512, 512))
    exact = _expected(a, b)
    bar = (
        1.5
        * (
            (to_tf32(a.cpu(), "truncate").double() @ to_tf32(b.cpu(), "truncate").double() - exact.cpu()).norm()
            / exact.norm()
        ).item()
    )
    error = assert_close(matmul(a, b, input_precision="tf32"), exact, tol=bar)
    assert error > 1e-5, "tf32 should not be as exact as fp32"
    assert_close(matmul(a, b, input_precision="ieee"), exact, dtype=torch.float32)


# ---------------------------------------------------------------- the tile map

# The worked example: M = 16, N = 8, 2×2 tiles → 8 × 4 tiles; GROUP_SIZE_M = 3.
# Groups: tile rows 0-2 (pids 0-11), 3-5 (pids 12-23), 6-7 (pids 24-31, a short group).
WORKED_EXAMPLE = [
    (0, 0),
    (1, 0),
    (2, 0),
    (0, 1),
    (1, 1),
    (2, 1),
    (0, 2),
    (1, 2),
    (2, 2),
    (0, 3),
    (1, 3),
    (2, 3),
    (3, 0),
    (4, 0),
    (5, 0),
    (3, 1),
    (4, 1),
    (5, 1),
    (3, 2),
    (4, 2),
    (5, 2),
    (3, 3),
    (4, 3),
    (5, 3),
    (6, 0),
    (7, 0),
    (6, 1),
    (7, 1),
    (6, 2),
    (7, 2),
    (6, 3),
    (7, 3),
]


def test_worked_example_table():
    num_pid_m, num_pid_n = 16 // 2, 8 // 2
    assert [tile_coordinates(pid, num_pid_m, num_pid_n, 3) for pid in range(32)] == WORKED_EXAMPLE
    assert kernel_tile_map(num_pid_m, num_pid_n, 3) == WORKED_EXAMPLE


@pytest.mark.parametrize("num_pid_m, num_pid_n, group", [(8, 4, 1), (5, 3, 2), (7, 6, 4), (3, 5, 8)])
def test_kernel_map_agrees_with_python_twin(num_pid_m, num_pid_n, group):
    expected = [tile_coordinates(pid, num_pid_m, num_pid_n, group) for pid in range(num_pid_m * num_pid_n)]
    assert kernel_tile_map(num_pid_m, num_pid_n, group) == expected


@pytest.mark.parametrize("num_pid_m", range(1, 10))
@pytest.mark.parametrize("num_pid_n", [1, 2, 5, 7])
@pytest.mark.parametrize("group", [1, 2, 3, 4, 16])
def test_every_tile_is_computed_exactly_once(num_pid_m, num_pid_n, group):
    tiles = [tile_coordinates(pid, num_pid_m, num_pid_n, group) for pid in range(num_pid_m * num_pid_n)]
    assert sorted(tiles) == [(m, n) for m in range(num_pid_m) for n in range(num_pid_n)]


def test_group_of_one_is_row_major():
    assert [tile_coordinates(pid, 3, 4, 1) for pid in range(12)] == [(m, n) for m in range(3) for n in range(4)]


def test_panels_read_by_a_wave():
    # 64×64 tiles (8192² in 128² tiles), 132 programs at once:
    assert panels_read(64, 64, 1, 132) == (3, 64)  # row-major: 3 A panels, every B panel
    assert panels_read(64, 64, 8, 132) == (8, 17)  # grouped: 8 A panels, 17 B panels
    assert panels_read(8, 4, 3, 6) == (3, 2)


def test_grouping_svg_is_well_formed_and_shades_the_wave():
    svg = grouping_svg(8, 4, 3, wave=6)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    rects = root.findall(f"{ns}rect")
    assert len(rects) == 8 + 4 + 32  # A panels, B panels, C tiles
    assert sum(r.get("fill") == "#e9c46a" for r in rects) == 6  # the running tiles
    assert sum(r.get("fill") == "#f4a261" for r in rects) == 3  # A panels they read
    assert sum(r.get("fill") == "#2a9d8f" for r in rects) == 2  # B panels they read
    labels = [t.text for t in root.findall(f"{ns}text")][2:]  # after the two caption lines
    assert sorted(int(x) for x in labels) == list(range(32))
    assert "reads 3 A + 2 B panels" in svg
    assert grouping_svg(8, 4, 3, wave=6) == svg  # pure: same input, same picture


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "make, kwargs, error, message",
    [
        (lambda: (random_tensor((4, 5)), random_tensor((6, 3))), {}, ValueError, "inner dimensions"),
        (lambda: (random_tensor((2, 4, 5)), random_tensor((5, 3))), {}, ValueError, "2-D"),
        (lambda: (random_tensor((4, 5)), random_tensor((5, 3), torch.float16)), {}, TypeError, "dtypes differ"),
        (lambda: (random_tensor((4, 5), torch.float64), random_tensor((5, 3), torch.float64)), {}, TypeError, "dtype"),
        (lambda: (random_tensor((4, 5)).tolist(), random_tensor((5, 3))), {}, TypeError, "torch.Tensor"),
        (lambda: (random_tensor((4, 5)), random_tensor((5, 3))), {"activation": "gelu"}, ValueError, "activation"),
        (lambda: (random_tensor((4, 5)), random_tensor((5, 3))), {"group_size_m": 0}, ValueError, "group_size_m"),
        (
            lambda: (random_tensor((4, 5)), random_tensor((5, 3))),
            {"input_precision": "fp8"},
            ValueError,
            "input_precision",
        ),
        (lambda: (random_tensor((4, 5)), random_tensor((5, 3))), {"config": {"BLOCK_K": 8}}, ValueError, "BLOCK_K"),
        (
            lambda: (random_tensor((4, 5)), random_tensor((5, 3))),
            {"config": {"BLOCK_M": 48}},
            ValueError,
            r"config\['BLOCK_M'\] must be a power of two >= 16, got 48",
        ),
        (
            lambda: (random_tensor((4, 5)), random_tensor((5, 3))),
            {"config": {"BLOCK_X": 16}},
            ValueError,
            r"config has unknown keys \['BLOCK_X'\]",
        ),
        (lambda: (random_tensor((4, 5)), random_tensor((5, 3))), {"group_size_m": 2.0}, TypeError, "group_size_m"),
    ],
)
def test_bad_input_is_rejected(make, kwargs, error, message):
    a, b = make()
    with pytest.raises(error, match=message):
        matmul(a, b, **kwargs)


def test_wrong_device_is_rejected():
    other = "meta"
    with pytest.raises(ValueError, match="kernels run on"):
        matmul(torch.empty(4, 5, device=other), torch.empty(5, 3, device=other))


def test_int32_offset_limit(monkeypatch):
    """Operands whose offsets would overflow int32 are refused (shown with a lowered limit)."""
    monkeypatch.setattr(kernel, "MAX_OFFSET", 100)
    with pytest.raises(ValueError, match="int32 offsets"):
        matmul(random_tensor((16, 16)), random_tensor((16, 4)))
