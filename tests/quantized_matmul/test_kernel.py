"""The low-bit weight matmul against float64 PyTorch, with tolerances derived from the rounding analysis.

Every kernel result is compared with ``x @ dequantize(W).T`` in float64 and
must lie, element by element, within :func:`kernel_error_bound` (the bound
the page derives: one rounding of the dequantised weight to the activations'
dtype, fp32 accumulation, one rounding of the output), and within the usual
relative L2 bar of the dtype.
"""

from academy import DEVICE, INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import numpy as np
import pytest
import torch

from examples.quantized_matmul import kernel as qm
from examples.quantized_matmul import split_k
from examples.quantized_matmul.kernel import (
    QuantizedWeight,
    choose_path,
    dequantize,
    kernel_error_bound,
    pack,
    quantize,
    quantized_matmul,
    reference,
    unpack,
)

# bf16 arithmetic is wrong under the interpreter: the kernels upcast there, so bf16 is a GPU test only
DTYPES = [torch.float16] if INTERPRETED else [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, qm)
    poison_allocations(monkeypatch, split_k)  # the fp32 partial sums of split-K


def worst_ratio(y, x, packed) -> float:
    """max over elements of |y − x·ŴᵀF64| / kernel_error_bound: ≤ 1 means within the derived bound."""
    exact = x.double() @ dequantize(packed).double().T
    bound = kernel_error_bound(x, packed, x.dtype)
    return ((y.double() - exact).abs() / bound).max().item()


def check(y, x, packed):
    """Within the derived per-element bound, and within the dtype's relative L2 bar."""
    assert torch.isfinite(y).all(), "NaN or inf in the output: an element was never written"
    worst = worst_ratio(y, x, packed)
    assert worst <= 1.0, f"error exceeds the derived bound by {worst:.2f}x"
    assert_close(y, x.double() @ dequantize(packed).double().T, dtype=x.dtype)


@pytest.mark.parametrize("path", ["gemv", "dot"])
@pytest.mark.parametrize("bits, group", [(4, 16), (4, 32), (4, 128), (8, 16), (8, 64), (8, 256), (4, None), (8, -1)])
def test_paths_bits_groups(path, bits, group):
    M, N, K = (2, 40, 256) if path == "gemv" else (20, 40, 256)
    packed = quantize(random_tensor((N, K)), bits, group)
    x = random_tensor((M, K), torch.float16)
    check(quantized_matmul(x, packed, path=path), x, packed)


@pytest.mark.parametrize("path", ["gemv", "dot", "slab"])
def test_per_channel_ragged_k(path):
    """Per channel with K = 200: not a multiple of any power-of-two K step, so the K masks work."""
    packed = quantize(random_tensor((24, 200)), 4, None)
    x = random_tensor((3, 200), torch.float16)
    check(quantized_matmul(x, packed, path=path), x, packed)


@pytest.mark.parametrize("bits", [4, 8])
def test_slab_per_channel_with_k_shorter_than_a_step(bits, monkeypatch):
    """Per channel with K = 24: the slab kernel's K step was min(step, K) = 24, not a power of two, and
    Triton failed ("arange's range must be a power of 2"), reachable from path="auto" at M >= SLAB_MIN_M."""
    packed = quantize(random_tensor((40, 24)), bits, None)
    x = random_tensor((20, 24), torch.float16)
    check(quantized_matmul(x, packed, path="slab"), x, packed)
    monkeypatch.setattr(qm, "SLAB_MIN_M", 16)  # what "auto" does from 2048 rows, at 20
    check(quantized_matmul(x, packed), x, packed)


@pytest.mark.parametrize("bits", [4, 8])
def test_gemv_steps_span_groups_and_a_ragged_end(bits):
    """A GEMV step of 256 inputs covers 16 groups of 16 (each word row reads its own scale and zero point),
    and K = 384 leaves the last step half past the end, where the words and the metadata are masked."""
    packed = quantize(random_tensor((40, 384)), bits, 16)
    x = random_tensor((3, 384), torch.float16)
    check(quantized_matmul(x, packed, path="gemv", config={"BLOCK_K": 256, "BLOCK_N": 16}), x, packed)


@pytest.mark.parametrize("path", ["gemv", "dot"])
def test_split_k_slices(path):
    packed = quantize(random_tensor((24, 512)), 4, 32)
    x = random_tensor((2, 512), torch.float16)
    check(quantized_matmul(x, packed, path=path, config={"SPLIT_K": 4}), x, packed)


def test_symmetric_and_bf16_weights():
    w = random_tensor((33, 128), torch.bfloat16)
    packed = quantize(w, 4, 64, symmetric=True)
    assert packed.scales.dtype == torch.bfloat16 and (packed.zeros == 8).all()
    x = random_tensor((5, 128), torch.float16)
    check(quantized_matmul(x, packed), x, packed)


def test_non_contiguous_activations():
    packed = quantize(random_tensor((24, 128)), 8, 64)
    x = random_tensor((128, 6), torch.float16).T  # column-major view
    check(quantized_matmul(x, packed, path="dot"), x, packed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bits, group", [(4, 32), (4, None), (8, 256), (8, None)])
def test_pairs_every_code_at_every_position(bits, group, dtype):
    """The tensor-core kernel builds its operand two 16-bit weights per register (swap_ab.natural_pairs), with
    a different mask, shift or byte permute for each position of a code in its word. Code (n + w + 5p) mod
    2^bits of word w at position p: over 2^bits words every code sits at every position, against zero points
    that vary along the rows and the groups, at a decode size (16 rows) and a batch (40 rows)."""
    Q, eps = 2**bits, 32 // bits
    N, K = 16, 2**bits * eps
    k = torch.arange(K)[None, :]
    codes = (torch.arange(N)[:, None] + k // eps + 5 * (k % eps)) % Q
    groups = K // (group or K)
    zeros = (3 * torch.arange(N)[None, :] + 7 * torch.arange(groups)[:, None]) % Q
    scales = torch.rand(groups, N, dtype=dtype) + 0.5
    packed = QuantizedWeight(
        pack(codes, bits).to(DEVICE), scales.to(DEVICE), zeros.to(dtype).to(DEVICE), bits, group or K, (N, K)
    )
    for M in (16, 40):
        x = random_tensor((M, K), dtype)
        check(quantized_matmul(x, packed, path="dot"), x, packed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight_dtype", ["activations'", "float32"])
@pytest.mark.parametrize(
    "bits, group, K", [(4, 32, 320), (8, 32, 320), (4, 128, 256), (8, 16, 64), (4, None, 200), (8, None, 200)]
)
def test_swap_ab_batches(bits, group, K, weight_dtype, dtype):
    """The tensor-core path (swap_ab.py): packed half arithmetic where the scales are stored in the activations'
    dtype, fp32 per half otherwise (and for int8 with bf16); ragged K (200 per channel) masks the last step;
    2 and 16 rows take the decode config (scales after the product, K split), 17 and 70 rows are partial row
    tiles and N = 40 a partial weight tile."""
    w = random_tensor((40, K), dtype if weight_dtype == "activations'" else torch.float32)
    packed = quantize(w, bits, group)
    for M in (2, 16, 17, 70):
        x = random_tensor((M, K), dtype)
        check(quantized_matmul(x, packed, path="dot"), x, packed)


def _doctored(packed, *, scales=None, zeros=None):
    return QuantizedWeight(
        packed.data,
        packed.scales if scales is None else scales.contiguous(),
        packed.zeros if zeros is None else zeros.contiguous(),
        packed.bits,
        packed.group_size,
        packed.shape,
    )


@pytest.mark.parametrize("path", ["gemv", "dot", "slab"])
@pytest.mark.parametrize("bits, group", [(4, 32), (8, 64), (4, None)])
@pytest.mark.parametrize("fault", ["zero point + 1", "scale + 1%", "neighbouring group's metadata"])
def test_the_tolerance_catches_wrong_metadata(path, bits, group, fault):
    """The derived bound is tight enough to fail: the kernel is given a zero point off by one code, scales 1% off,
    or the metadata of the next group, and the result must fall outside the bound of the true weight.
    (A scale off by a fraction of a percent passes, and must: rounding ŵ to fp16 moves it by up to 2⁻¹¹.)"""
    packed = quantize(random_tensor((40, 256)), bits, group)
    if fault == "zero point + 1":
        bad = _doctored(packed, zeros=packed.zeros + 1)
    elif fault == "scale + 1%":
        bad = _doctored(packed, scales=packed.scales * 1.01)
    elif packed.per_channel:  # one group per row: the neighbouring column's metadata
        bad = _doctored(packed, scales=packed.scales.roll(1, dims=1), zeros=packed.zeros.roll(1, dims=1))
    else:
        bad = _doctored(packed, scales=packed.scales.roll(1, dims=0), zeros=packed.zeros.roll(1, dims=0))
    x = random_tensor((8 if path == "gemv" else 20, 256), torch.float16)  # enough outputs for a clear margin
    assert worst_ratio(quantized_matmul(x, packed, path=path), x, packed) <= 1.0
    assert worst_ratio(quantized_matmul(x, bad, path=path), x, packed) > 1.0, f"{fault} went unnoticed"


@pytest.mark.parametrize("path", ["gemv", "dot", "slab"])
def test_row_padded_activations(path):
    """x a slice of a wider buffer: unit stride along K, row stride > K, passed to the kernels as is."""
    packed = quantize(random_tensor((24, 128)), 4, 32)
    x = random_tensor((3, 160), torch.float16)[:, 16:144]
    assert x.stride() == (160, 1)
    check(quantized_matmul(x, packed, path=path), x, packed)


@pytest.mark.parametrize("split", [2, 3, 5])
@pytest.mark.parametrize("M", [2, 16])
def test_swap_ab_ragged_slices(M, split):
    """K = 640 is 5 steps of 128 (group 128): 2 slices of 3 and 2 steps, 3 of 2, 2 and 1, or 5 of one."""
    packed = quantize(random_tensor((40, 640)), 4, 128)
    x = random_tensor((M, 640), torch.float16)
    check(quantized_matmul(x, packed, path="dot", config={"SPLIT_K": split, "BLOCK_K": 128}), x, packed)


@pytest.mark.parametrize(
    "tiles, K, block_k, per_sm, split",
    [
        (64, 8192, 128, 2, 4),
        (112, 4096, 128, 2, 2),
        (224, 4096, 128, 2, 1),  # the tensor-core kernel's target
        (256, 4096, 256, 8, 4),
        (8, 1024, 128, 2, 2),
        (1000, 512, 32, 2, 1),
    ],
)
def test_pick_split(monkeypatch, tiles, K, block_k, per_sm, split):
    """Slices bring the programs nearest to ``per_sm`` per SM (132 SMs), each slice at least four K steps
    long (the fifth case is capped by that, the last has more tiles than programs wanted)."""
    monkeypatch.setattr(split_k, "sm_count", lambda: 132)
    cfg = split_k.pick_split(dict(SPLIT_K=0, PROGRAMS_PER_SM=per_sm, BLOCK_K=block_k), tiles, K)
    assert cfg["SPLIT_K"] == split


@pytest.mark.parametrize("N, warps, block_k, split", [(8192, 16, 512, 1), (14336, 8, 256, 1), (4096, 16, 512, 2)])
def test_int8_gemv_fills_the_warp_slots(monkeypatch, N, warps, block_k, split):
    """int8 GEMV at M = 1 on 132 SMs: programs of 16 warps while the column blocks fit 64 warps per SM at once
    (512 of them for N = 8192), else of 8; one word row per thread; K split only to fill what is left."""
    for module in (qm, split_k):
        monkeypatch.setattr(module, "sm_count", lambda: 132)
    monkeypatch.setattr(qm, "INTERPRETED", False)
    packed = quantize(random_tensor((16, 64)), 8, 32)
    packed = QuantizedWeight(packed.data, packed.scales, packed.zeros, 8, 32, (N, 4096))  # sizes only
    cfg = qm.gemv_config(1, N, 4096, packed)
    assert (cfg["num_warps"], cfg["BLOCK_K"], cfg["SPLIT_K"]) == (warps, block_k, split)


def test_k_slices_are_whole_steps():
    assert split_k.k_slices(5 * 128, 128, 4) == (256, 3)  # 4 slices asked of 5 steps: 2 + 2 + 1
    assert split_k.k_slices(8192, 128, 4) == (2048, 4)


def test_dispatch_rule():
    assert choose_path(1) == "gemv"
    assert choose_path(qm.GEMV_MAX_M + 1) == "dot"
    assert choose_path(qm.SLAB_MIN_M - 1) == "dot"
    assert choose_path(qm.SLAB_MIN_M) == "slab"


@pytest.mark.parametrize("bits, group", [(4, 16), (4, 128), (8, 32), (4, None), (8, None)])
@pytest.mark.parametrize("columns", [None, 48, 37])
def test_slab_path(bits, group, columns):
    """Dequantised slabs and the fp16 matmul: one slab, slabs of 48 (ragged last slab) and of 37 (rows
    not 16-byte aligned: the matmul falls back from TMA to pointers)."""
    packed = quantize(random_tensor((100, 256)), bits, group)
    x = random_tensor((20, 256), torch.float16)
    config = None if columns is None else {"COLUMNS": columns}
    check(quantized_matmul(x, packed, path="slab", config=config), x, packed)


@pytest.mark.parametrize(
    ("K", "element_size", "columns"),
    [(8192, 2, 4096), (4096, 2, 8192), (65536, 2, 512), (2**20, 2, 256), (8192, 4, 2048)],
)
def test_slab_width_keeps_the_buffer_within_its_bytes(monkeypatch, K, element_size, columns):
    monkeypatch.setattr(qm, "INTERPRETED", False)
    packed = quantize(random_tensor((16, 64)), 4, 32)
    cfg = qm.slab_config(100_000, K, element_size, packed)
    assert cfg["COLUMNS"] == columns and cfg["COLUMNS"] % 256 == 0
    assert cfg["COLUMNS"] * K * element_size <= max(qm.SLAB_CONFIG["BYTES"], 256 * K * element_size)
    assert qm.slab_config(300, K, element_size, packed)["COLUMNS"] == min(300, columns)


def test_reference_is_the_dequantised_product():
    packed = quantize(random_tensor((16, 64)), 4, 32)
    x = random_tensor((3, 64), torch.float16)
    assert_close(reference(x, packed), x.double() @ dequantize(packed).double().T, dtype=torch.float16)


# ---------------------------------------------------------------- packing


def test_pack_layout_bit_by_bit():
    """Code k of a row sits in word k // 8 at bit 4·(k % 8): the top code sets the sign bit."""
    q = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 15]])  # one row (N = 1), K = 8
    ((word,),) = pack(q, 4).tolist()
    assert word == 0xF7654321 - 2**32  # negative: bit 31 is set by the code 15
    assert torch.equal(unpack(pack(q, 4), 4), q.to(torch.int32))


@pytest.mark.parametrize("bits", [4, 8])
def test_pack_round_trip(bits):
    q = torch.randint(0, 2**bits, (7, 64))
    assert torch.equal(unpack(pack(q, bits), bits), q.to(torch.int32))


def test_arithmetic_shift_needs_the_mask():
    """>> on int32 copies the sign bit: without the mask the top int4 code 15 reads as -1."""
    word = pack(torch.tensor([[0, 0, 0, 0, 0, 0, 0, 15]]), 4)  # (1, 1)
    assert (word >> 28).item() == -1
    assert ((word >> 28) & 0xF).item() == 15


def test_packed_sizes():
    packed = quantize(random_tensor((64, 256)), 4, 128)
    assert packed.data.shape == (32, 64) and packed.data.dtype == torch.int32  # (K / 8, N)
    assert packed.scales.shape == packed.zeros.shape == (2, 64)  # (K / group, N)
    assert packed.elements_per_sample == 8 and quantize(random_tensor((8, 64)), 8, 32).elements_per_sample == 4
    assert packed.nbytes == 64 * 256 // 2 + 2 * 64 * 2 * 4


# ---------------------------------------------------------------- edges and bad inputs


def test_empty_m():
    packed = quantize(random_tensor((8, 64)), 4, 32)
    assert quantized_matmul(random_tensor((0, 64), torch.float16), packed).shape == (0, 8)


@pytest.mark.parametrize(
    "w, kwargs, error, match",
    [
        (torch.ones(8, 100), {"group_size": 32}, ValueError, "not a multiple of group_size"),
        (torch.ones(8, 100), {"group_size": None}, ValueError, "multiple of 8"),
        (torch.ones(8, 96), {"group_size": 48}, ValueError, "power of two"),
        (torch.ones(8, 64), {"bits": 3}, ValueError, "bits"),
        (torch.ones(8, 64, dtype=torch.int32), {}, TypeError, "float"),
        (torch.ones(64), {}, ValueError, "2-D"),
        (torch.ones(8, 64), {"group_size": 32.0}, TypeError, "group_size"),
        (torch.ones(8, 64), {"bits": 4.0}, TypeError, "bits must be an int, got float"),
        (torch.ones(8, 64), {"bits": True}, TypeError, "bits must be an int, got bool"),
        (torch.ones(8, 64), {"group_size": 32, "symmetric": "yes"}, TypeError, "symmetric must be a bool, got str"),
    ],
)
def test_bad_quantize_inputs(w, kwargs, error, match):
    with pytest.raises(error, match=match):
        quantize(w, **kwargs)


def test_numpy_scalars_are_accepted_by_quantize():
    """NumPy ints and bools are what they say (np.int64(4) is a bit width; 4.0 is not)."""
    w = random_tensor((8, 64))
    ours = quantize(w, np.int64(8), np.int32(32), np.bool_(True))
    plain = quantize(w, 8, 32, True)
    assert (ours.bits, ours.group_size) == (8, 32) and type(ours.bits) is int and type(ours.group_size) is int
    assert torch.equal(ours.data, plain.data) and torch.equal(ours.scales, plain.scales)


def test_dequantize_refuses_a_plain_tensor():
    with pytest.raises(TypeError, match="packed must be a QuantizedWeight .*, got Tensor"):
        dequantize(random_tensor((8, 64)))


def test_activations_that_require_grad_are_refused():
    """quantized_matmul has no backward: its result would carry no gradient, cutting the graph silently."""
    packed = quantize(random_tensor((8, 64)), 4, 32)
    x = random_tensor((2, 64), torch.float16, requires_grad=True)
    with pytest.raises(ValueError, match="quantized_matmul is forward only .* x requires grad"):
        quantized_matmul(x, packed)
    with torch.no_grad():
        check(quantized_matmul(x, packed), x.detach(), packed)


@pytest.mark.parametrize(
    "path, config, match",
    [
        ("gemv", {"BLOCK_N": 24}, r"config\['BLOCK_N'\] must be a power of two"),
        ("dot", {"BLOCK_K": 8}, r"config\['BLOCK_K'\] must be a power of two >= 16"),
        ("dot", {"BLOCK_X": 16}, r"config has unknown keys \['BLOCK_X'\]"),
        ("slab", {"COLUMNS": 0}, r"config\['COLUMNS'\] must be a positive int"),
    ],
)
def test_bad_config_is_a_clear_error(path, config, match):
    packed = quantize(random_tensor((8, 64)), 4, 32)
    with pytest.raises(ValueError, match=match):
        quantized_matmul(random_tensor((20, 64), torch.float16), packed, path=path, config=config)


def test_bad_matmul_inputs():
    packed = quantize(random_tensor((8, 64)), 4, 32)
    with pytest.raises(TypeError, match="dtype"):
        quantized_matmul(random_tensor((2, 64)), packed)  # fp32 activations
    with pytest.raises(ValueError, match="K = 32"):
        quantized_matmul(random_tensor((2, 32), torch.float16), packed)
    with pytest.raises(TypeError, match="QuantizedWeight"):
        quantized_matmul(random_tensor((2, 64), torch.float16), random_tensor((8, 64), torch.float16))
    with pytest.raises(ValueError, match="path"):
        quantized_matmul(random_tensor((2, 64), torch.float16), packed, path="magic")
    broken = QuantizedWeight(packed.data[:4].contiguous(), packed.scales, packed.zeros, 4, 32, (8, 64))
    with pytest.raises(ValueError, match="packed.data"):
        quantized_matmul(random_tensor((2, 64), torch.float16), broken)


def test_bad_packed_metadata():
    packed = quantize(random_tensor((8, 64)), 4, 32)
    x = random_tensor((2, 64), torch.float16)
    with pytest.raises(ValueError, match="scales and zeros must be"):
        quantized_matmul(x, _doctored(packed, scales=packed.scales[:1]))
    with pytest.raises(ValueError, match="packed.zeros must be contiguous"):
        quantized_matmul(x, QuantizedWeight(packed.data, packed.scales, packed.zeros.T.contiguous().T, 4, 32, (8, 64)))
    with pytest.raises(ValueError, match="packed.data must be int32"):
        quantized_matmul(x, QuantizedWeight(packed.data.long(), packed.scales, packed.zeros, 4, 32, (8, 64)))


def test_gemv_row_limit():
    """The GEMV puts one program per row on grid axis z (at most 65535): more rows are refused, not truncated."""
    packed = quantize(random_tensor((8, 64)), 4, 32)
    with pytest.raises(ValueError, match="at most 65535 rows"):
        quantized_matmul(random_tensor((65536, 64), torch.float16), packed, path="gemv")


def test_wrong_device():
    elsewhere = "meta" if DEVICE == "cpu" else "cpu"
    packed = quantize(random_tensor((8, 64)), 4, 32)
    with pytest.raises(ValueError, match="kernels run on"):
        quantized_matmul(torch.ones(2, 64, dtype=torch.float16, device=elsewhere), packed)


# ---------------------------------------------------------------- GPU sizes


@pytest.mark.skipif(INTERPRETED, reason="GPU sizes: the interpreter would take minutes")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("M", [1, 16, 1000])
def test_gpu_sizes(M, bits, dtype):
    N, K = 3000, 4096
    packed = quantize(random_tensor((N, K), dtype, scale=K**-0.5), bits, 128)
    x = random_tensor((M, K), dtype)
    check(quantized_matmul(x, packed), x, packed)


@pytest.mark.skipif(INTERPRETED, reason="GPU sizes: the interpreter would take minutes")
@pytest.mark.parametrize("bits", [4, 8])
def test_gpu_slab_scratch_is_one_slab(bits):
    """The slab path allocates the output and one slab, nothing the size of the dense weight."""
    N, K, M = 8192, 4096, 1024
    packed = quantize(random_tensor((N, K), torch.float16, scale=K**-0.5), bits, 128)
    x = random_tensor((M, K), torch.float16)
    config = {"BYTES": 16 * 2**20}
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    y = quantized_matmul(x, packed, path="slab", config=config)
    torch.cuda.synchronize()
    scratch = torch.cuda.max_memory_allocated() - before - y.numel() * y.element_size()
    assert scratch <= config["BYTES"] + 2**20, f"{scratch / 2**20:.1f} MiB of scratch"
    check(y, x, packed)


@pytest.mark.skipif(INTERPRETED, reason="GPU sizes: the interpreter would take minutes")
@pytest.mark.parametrize("path", ["gemv", "dot", "slab"])
@pytest.mark.parametrize("group", [32, 256, None])
def test_gpu_groups_and_paths(path, group):
    packed = quantize(random_tensor((1000, 2048), torch.float16), 4, group)
    x = random_tensor((5, 2048), torch.bfloat16)
    check(quantized_matmul(x, packed, path=path), x, packed)
