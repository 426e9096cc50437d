"""Low-bit weight matmul: ``y = x @ dequantize(W).T`` with int4 or int8 weights (forward only).

``quantize(w, bits=4, group_size=128, symmetric=False)`` turns a float weight
``w`` of shape (N, K) (an ``nn.Linear`` weight: N outputs, K inputs) into a
:class:`QuantizedWeight`: unsigned integer codes ``q`` packed eight (int4) or
four (int8) to an int32 along K, and one scale ``s`` and zero point ``z`` per
group of ``group_size`` consecutive inputs of a row (``None`` or ``-1``: one
group per row, "per channel"), such that ``w ≈ (q − z)·s``.

``quantized_matmul(x, packed)`` multiplies fp16 or bf16 activations ``x`` of
shape (M, K) by the dequantised weight. Three paths, one launcher:

* :func:`qgemv_kernel`: CUDA cores, one activation row per program, each
  thread owning output columns and walking K, for M = 1 (decode), where the
  packed weight read is the whole cost.
* :func:`examples.quantized_matmul.swap_ab.qmm_swap_ab_kernel`: tensor
  cores on ``x`` tiles and weight tiles dequantised in registers, for
  2 ≤ M < ``SLAB_MIN_M``. It computes the transposed product, so that the
  weight tile is the tensor cores' register operand, and at decode sizes
  splits K across programs (fp32 partials and a second, deterministic
  reduction pass: split_k.py), since a few rows give too few output tiles to
  fill the GPU.
* Slabs, for prefill batches (M ≥ ``SLAB_MIN_M``), where the product is
  compute-bound and dequantising inside the tensor-core loop stalls it:
  :func:`dequantize_columns_kernel` writes a slab of the weight in fp16 and
  the matmul chapter's kernel multiplies by it, slab after slab through one
  buffer of at most ``SLAB_CONFIG["BYTES"]``, or of one 256-column slab where K
  is too long for that (K > 131072 in fp16).

The first two never write a dequantised weight to memory: they load packed
int32 words, unpack and dequantise them in registers, and accumulate in fp32.

The packed weight is stored transposed, ``(K/8, N)`` words for int4, so that
the decode kernels read it along N in wide coalesced loads (the layout the
tuning sweep measured fastest for decode).

Run this file (``python -m examples.quantized_matmul.kernel``) for a quick check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from academy import DEVICE, INTERPRETED
from academy.grid import sm_count
from academy.validation import as_bool, as_int, check_config, check_forward_only, check_tensor

import torch
import triton
import triton.language as tl

from examples.matmul.kernel import matmul
from examples.quantized_matmul.split_k import k_slices, pick_split, slice_outputs, sum_slices
from examples.quantized_matmul.swap_ab import SWAP_AB_CONFIGS, swap_ab_config, swap_ab_matmul

BITS = (4, 8)
ACTIVATION_DTYPES = (torch.float16, torch.bfloat16)
WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
PATHS = ("auto", "gemv", "dot", "slab")
MIN_GROUP = 16
"""Smallest group: one ``tl.dot`` step (16 deep) never straddles two groups."""
MAX_COORD = 2**31 - 1


# --8<-- [start:packed_weight]
@dataclass(frozen=True)
class QuantizedWeight:
    """A weight of shape ``(N, K)`` stored as ``w ≈ (q − z)·s``, transposed and packed along K.

    ``data``: int32 ``(K // elements_per_sample, N)``; code ``q[n, k]`` sits in
    ``data[k // elements_per_sample, n]`` at bit ``(k % elements_per_sample)·bits``.
    ``scales``, ``zeros``: ``(K // group_size, N)``, float; ``zeros`` hold integers.
    Every row of the three tensors runs along N, the direction a kernel reads contiguously.
    """

    data: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor
    bits: int
    group_size: int
    shape: tuple[int, int]

    @property
    def elements_per_sample(self) -> int:
        """Codes per int32 word: 8 for int4, 4 for int8."""
        return 32 // self.bits

    @property
    def per_channel(self) -> bool:
        return self.group_size == self.shape[1]

    @property
    def nbytes(self) -> int:
        """What a matmul reads for the weight: packed codes, scales and zeros."""
        return sum(t.numel() * t.element_size() for t in (self.data, self.scales, self.zeros))


# --8<-- [end:packed_weight]


def _check_quantize_args(w, bits, group_size) -> tuple[int, int]:
    """Checks, and returns ``(bits, group)`` as Python ints, the group resolved (per channel: K)."""
    if not isinstance(w, torch.Tensor) or w.dtype not in WEIGHT_DTYPES:
        raise TypeError(
            f"w must be a float tensor of dtype {WEIGHT_DTYPES}, got {getattr(w, 'dtype', type(w).__name__)}"
        )
    if w.dim() != 2 or w.numel() == 0:
        raise ValueError(f"w must be a non-empty 2-D (N, K) weight, got shape {tuple(w.shape)}")
    bits = as_int("bits", bits)  # 4.0 is refused: it is not a bit width
    if bits not in BITS:
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
    N, K = w.shape
    eps = 32 // bits
    if group_size is not None:
        group_size = as_int("group_size", group_size)  # the message of a wrong type names None and -1 too
    if group_size is None or group_size == -1:
        if K % eps:
            raise ValueError(f"K = {K} must be a multiple of {eps} to pack {bits}-bit codes {eps} to an int32")
        return bits, K
    if group_size < MIN_GROUP or group_size & (group_size - 1):
        raise ValueError(
            f"group_size must be a power of two >= {MIN_GROUP} (or None/-1 for per channel), got {group_size}"
        )
    if K % group_size:
        raise ValueError(
            f"K = {K} is not a multiple of group_size = {group_size}: "
            f"pad the weight's K or pick a group size that divides it"
        )
    return bits, group_size


# --8<-- [start:quantize]
def _round_up_to(s: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``s`` (float64, > 0) stored in ``dtype``, rounded up, never down: no code may leave its range."""
    stored = s.to(dtype)
    below = stored.double() < s
    if dtype == torch.float32:
        bumped = torch.nextafter(stored, torch.full_like(stored, math.inf))
    else:
        bumped = (stored.view(torch.int16) + 1).view(dtype)  # the next value up, for a positive number
    return torch.where(below, bumped, stored)


def quantize(w: torch.Tensor, bits: int = 4, group_size: int | None = 128, symmetric: bool = False) -> QuantizedWeight:
    """Round ``w`` (N, K) to ``bits``-bit codes with one scale and zero point per group.

    Asymmetric (default): each group's range ``[min(w, 0), max(w, 0)]`` is cut
    into ``2^bits − 1`` steps of size ``s``, and ``z`` is the code of 0.
    Symmetric: ``s = max|w| / (2^(bits−1) − 1)`` and ``z = 2^(bits−1)`` fixed.
    Scales and zeros are stored in ``w``'s dtype. Runs on any device (plain PyTorch).
    """
    bits, group = _check_quantize_args(w, bits, group_size)
    symmetric = as_bool("symmetric", symmetric)
    N, K = w.shape
    qmax = 2**bits - 1
    wg = w.double().reshape(N, K // group, group)  # float64: the only rounding is the one we choose
    if symmetric:
        half = 2 ** (bits - 1)
        s = wg.abs().amax(dim=-1) / (half - 1)
    else:
        lo, hi = wg.amin(dim=-1).clamp(max=0), wg.amax(dim=-1).clamp(min=0)  # (1)!
        s = (hi - lo) / qmax
    s = torch.where(s > 0, s, torch.ones_like(s))  # an all-zero group: any scale is exact
    scales = _round_up_to(s, w.dtype)  # (2)!
    s = scales.double()
    if symmetric:
        z = torch.full_like(s, 2 ** (bits - 1))
    else:
        z = torch.round(-lo / s).clamp(0, qmax)  # (3)!
    q = torch.clamp(torch.round(wg / s[..., None]) + z[..., None], 0, qmax).to(torch.int64).reshape(N, K)
    return QuantizedWeight(pack(q, bits), scales.T.contiguous(), z.to(scales.dtype).T.contiguous(), bits, group, (N, K))


def pack(q: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes ``q`` (N, K) in ``[0, 2^bits)`` → int32 words (K·bits/32, N): code k of column n at bit (k % eps)·bits."""
    eps = 32 // bits
    shifts = torch.arange(eps, device=q.device, dtype=torch.int64)[:, None] * bits
    words = (q.T.to(torch.int64).reshape(-1, eps, q.shape[0]) << shifts).sum(dim=1)  # (4)!
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def unpack(data: torch.Tensor, bits: int) -> torch.Tensor:
    """The inverse of :func:`pack`: int32 words (K/eps, N) → codes (N, K), int32 in ``[0, 2^bits)``."""
    eps = 32 // bits
    shifts = torch.arange(eps, device=data.device, dtype=torch.int32)[:, None] * bits
    codes = (data[:, None, :] >> shifts) & (2**bits - 1)  # (5)!
    return codes.reshape(-1, data.shape[1]).T


def dequantize(packed: QuantizedWeight) -> torch.Tensor:
    """``(q − z)·s`` as float32 (N, K): exact for fp16/bf16 scales ((q − z) has at most 9 significant bits,
    s 11 or 8); fp32 scales (from fp32 weights) round the product once, 2⁻²⁴ relative."""
    _check_packed(packed)
    N, K = packed.shape
    q = unpack(packed.data, packed.bits).float().reshape(N, K // packed.group_size, packed.group_size)
    w = (q - packed.zeros.T.float()[..., None]) * packed.scales.T.float()[..., None]
    return w.reshape(N, K)


# --8<-- [end:quantize]


# --8<-- [start:reference]
def reference(x: torch.Tensor, packed: QuantizedWeight) -> torch.Tensor:
    """``x @ dequantize(packed).T`` by PyTorch in fp32, returned in ``x``'s dtype."""
    return (x.float() @ dequantize(packed).to(x.device).T).to(x.dtype)


# --8<-- [end:reference]


# --8<-- [start:unpack_tile]
@triton.jit
def dequantize_tile(packed, s, z, BITS: tl.constexpr):
    """int32 words (W, C) → float32 weights (W, 32 // BITS, C): ``(q − z)·s``, s and z per column.

    No int-to-float conversion instruction: the code is OR-ed into the
    mantissa of 2²³ and 2²³ + z is subtracted, two cheap exact operations.
    """
    EPS: tl.constexpr = 32 // BITS
    shifts = tl.arange(0, EPS) * BITS
    q = (packed[:, None, :] >> shifts[None, :, None]) & ((1 << BITS) - 1)  # (1)!
    v = (q | 0x4B000000).to(tl.float32, bitcast=True)  # (2)!
    w = v - (z + 8388608.0)[None, None, :]  # (3)!
    return w * s[None, None, :]  # (4)!


# --8<-- [end:unpack_tile]


# --8<-- [start:gemv_kernel]
@triton.jit
def qgemv_kernel(
    x_ptr,
    data_ptr,
    s_ptr,
    z_ptr,
    out_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    stride_xm,
    stride_dk,
    stride_sg,
    stride_os,
    stride_om,
    BITS: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    EPS: tl.constexpr = 32 // BITS
    HALF: tl.constexpr = EPS // 2  # codes per 16-bit half of a word
    WORDS: tl.constexpr = BLOCK_K // EPS
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    m = tl.program_id(2)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    safe_cols = cols if EVEN_N else cols % N  # every load in bounds; the store is masked
    words = tl.arange(0, WORDS)
    k_begin = split * K_PER_SPLIT
    k_end = tl.minimum(K, k_begin + K_PER_SPLIT)
    d_ptrs = data_ptr + (k_begin // EPS + words).to(tl.int64)[:, None] * stride_dk + safe_cols[None, :]  # (1)!
    x_ptrs = x_ptr + m.to(tl.int64) * stride_xm + k_begin + words * EPS
    meta_cols = tl.max_contiguous(safe_cols, 4)[None, :]  # (2)!
    acc = tl.zeros((WORDS, BLOCK_N), dtype=tl.float32)
    for k_start in range(k_begin, k_end, BLOCK_K):
        k_word = k_start + words * EPS  # the first input of each word row
        in_k = k_word < k_end
        meta = (k_word // GROUP).to(tl.int64)[:, None] * stride_sg + meta_cols  # (3)!
        if EVEN_K:
            packed = tl.load(d_ptrs)
            s = tl.load(s_ptr + meta).to(tl.float32)
            z = tl.load(z_ptr + meta).to(tl.float32) * 2.0**-49
        else:  # rows past the end: no words, and no group to read metadata from
            packed = tl.load(d_ptrs, mask=in_k[:, None], other=0)
            s = tl.load(s_ptr + meta, mask=in_k[:, None], other=0.0).to(tl.float32)
            z = tl.load(z_ptr + meta, mask=in_k[:, None], other=0.0).to(tl.float32) * 2.0**-49
        high = packed >> 16  # (4)!
        part = tl.zeros((WORDS, BLOCK_N), dtype=tl.float32)
        for i in tl.static_range(EPS):
            shift = (i % HALF) * BITS
            half = packed if i < HALF else high
            tiny = (half & (((1 << BITS) - 1) << shift)).to(tl.float32, bitcast=True)  # (5)!
            w = tiny * (2.0**100 / (1 << shift)) - z  # (6)!
            if EVEN_K:
                xi = tl.load(x_ptrs + i)
            else:
                xi = tl.load(x_ptrs + i, mask=in_k, other=0.0)  # (7)!
            part += w * xi.to(tl.float32)[:, None]
        acc += part * s  # (8)!
        d_ptrs += WORDS * stride_dk
        x_ptrs += BLOCK_K
    y = tl.sum(acc, axis=0) * 2.0**49  # (9)!
    out_ptrs = out_ptr + split.to(tl.int64) * stride_os + m.to(tl.int64) * stride_om + cols
    if SPLIT_K == 1:
        tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=cols < N)
    else:
        tl.store(out_ptrs, y, mask=cols < N)


# --8<-- [end:gemv_kernel]


# --8<-- [start:slab_kernel]
@triton.jit
def dequantize_columns_kernel(
    data_ptr,
    s_ptr,
    z_ptr,
    out_ptr,
    N,
    K,
    first_col,
    n_cols,
    stride_ok,
    BITS: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Columns ``[first_col, first_col + n_cols)`` of ``dequantize(W)ᵀ`` into ``out`` (K, n_cols), row stride
    ``stride_ok``: a slab of the (K, N) matrix that the tensor-core matmul reads as its row-major B operand."""
    EPS: tl.constexpr = 32 // BITS
    WORDS: tl.constexpr = BLOCK_K // EPS
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_start = tl.program_id(1) * BLOCK_K
    words = tl.arange(0, WORDS)
    in_slab = cols < n_cols
    src_cols = first_col + cols
    packed = tl.load(
        data_ptr + (k_start // EPS + words).to(tl.int64)[:, None] * N + src_cols[None, :],
        mask=(k_start + words * EPS < K)[:, None] & in_slab[None, :],
        other=0,
    )  # (1)!
    meta = (k_start // GROUP).to(tl.int64) * N + src_cols  # one group per K step: BLOCK_K <= GROUP
    s = tl.load(s_ptr + meta, mask=in_slab, other=1.0).to(tl.float32)
    z = tl.load(z_ptr + meta, mask=in_slab, other=0.0).to(tl.float32)
    w = tl.reshape(dequantize_tile(packed, s, z, BITS), (BLOCK_K, BLOCK_N))  # row k = word·EPS + e
    ks = k_start + tl.arange(0, BLOCK_K)
    tl.store(
        out_ptr + ks.to(tl.int64)[:, None] * stride_ok + cols[None, :],
        w.to(out_ptr.dtype.element_ty),
        mask=(ks < K)[:, None] & in_slab[None, :],
    )  # (2)!


# --8<-- [end:slab_kernel]


# --8<-- [start:configs]
GEMV_MAX_M = 1
"""Largest M sent to the CUDA-core GEMV kernel; above it the tensor cores win."""
GEMV_CONFIGS = {  # by bit width (the H100 sweeps' best); 0: sized per call by gemv_config
    4: dict(BLOCK_N=16, BLOCK_K=1024, SPLIT_K=0, PROGRAMS_PER_SM=2, num_warps=8, num_stages=1),
    8: dict(BLOCK_N=16, BLOCK_K=0, SPLIT_K=0, PROGRAMS_PER_SM=0, num_warps=0, num_stages=1),  # (1)!
}
GEMV_WARPS_PER_SM = 64
"""What the int8 GEMV fills: an SM's warp slots (64 on Hopper), with as few programs as will do."""
MAX_GEMV_ROWS = 65535
"""The GEMV runs one program per activation row on grid axis z, which CUDA caps at 65535."""

SLAB_MIN_M = 2048
"""From this many rows up, ``"auto"`` dequantises the weight slab by slab and runs the fp16 matmul on each
slab: the product is then compute-bound enough that the tensor cores should never wait for the
dequantisation. Measured: the fused kernel is faster at M = 1024, the slabs at M = 4096; the switch sits
between."""
SLAB_CONFIG = dict(BYTES=64 * 2**20, BLOCK_N=128, BLOCK_K=64, num_warps=4)
"""``BYTES``: the most dequantised weight alive at once (the slab buffer). The H100 sweep timed slabs of
16 MiB to the whole weight: wider slabs won at M = 1024 (fewer, fuller matmul waves)."""


def slab_config(N: int, K: int, element_size: int, packed: QuantizedWeight, overrides: dict | None = None) -> dict:
    """Kernel meta-parameters and ``COLUMNS``, the slab width: as many weight rows as ``BYTES`` holds,
    a multiple of 256 (the matmul's widest tile), at least 256 and at most N."""
    cfg = dict(SLAB_CONFIG)
    if INTERPRETED:
        cfg.update(BLOCK_N=16, BLOCK_K=32)
    cfg.update(overrides or {})
    if not packed.per_channel:  # one group per K step (both powers of two); per channel, any step is in group 0
        cfg["BLOCK_K"] = min(cfg["BLOCK_K"], packed.group_size)
    if "COLUMNS" not in cfg:
        cfg["COLUMNS"] = max(256, cfg["BYTES"] // (K * element_size) // 256 * 256)
    cfg["COLUMNS"] = min(cfg["COLUMNS"], N)
    return cfg


def gemv_config(M: int, N: int, K: int, packed: QuantizedWeight, overrides: dict | None = None) -> dict:
    """int4 takes its config as is. int8 fills ``GEMV_WARPS_PER_SM`` warps per SM, with programs of 16 warps
    where that many column blocks fit at once, else of 8, each thread holding one word row of a K step."""
    cfg = dict(GEMV_CONFIGS[packed.bits])
    if INTERPRETED:
        cfg.update(BLOCK_N=16, BLOCK_K=32, num_warps=4)
    cfg.update(overrides or {})  # any BLOCK_K: each word row finds its own group
    columns = triton.cdiv(N, cfg["BLOCK_N"]) * M
    if cfg["num_warps"] == 0:
        cfg["num_warps"] = 16 if columns * 16 <= GEMV_WARPS_PER_SM * sm_count() else 8  # (2)!
    if cfg["BLOCK_K"] == 0:
        threads_per_word_row = cfg["BLOCK_N"] // 4  # 16-byte loads: four words each
        cfg["BLOCK_K"] = 32 * cfg["num_warps"] // threads_per_word_row * packed.elements_per_sample
    if cfg["PROGRAMS_PER_SM"] == 0:
        cfg["PROGRAMS_PER_SM"] = GEMV_WARPS_PER_SM // cfg["num_warps"]
    return pick_split(cfg, columns, K)


# --8<-- [end:configs]


# --8<-- [start:launcher]
def _check_packed(packed) -> None:
    if not isinstance(packed, QuantizedWeight):
        raise TypeError(f"packed must be a QuantizedWeight (from quantize), got {type(packed).__name__}")


def check_inputs(x, packed, path) -> None:
    check_tensor("x", x, ACTIVATION_DTYPES)
    _check_packed(packed)
    if x.dim() != 2:
        raise ValueError(f"x must be a 2-D (M, K) matrix, got shape {tuple(x.shape)}")
    N, K = packed.shape
    if x.shape[1] != K:
        raise ValueError(f"x has K = {x.shape[1]} columns but the weight is {N}×{K}")
    for name in ("data", "scales", "zeros"):
        t = getattr(packed, name)
        if t.device != x.device:
            raise ValueError(f"packed.{name} is on {t.device}, x on {x.device}")
        if not t.is_contiguous():
            raise ValueError(f"packed.{name} must be contiguous")
    if packed.data.dtype != torch.int32 or packed.data.shape != (K // packed.elements_per_sample, N):
        raise ValueError(
            f"packed.data must be int32 {(K // packed.elements_per_sample, N)}, "
            f"got {packed.data.dtype} {tuple(packed.data.shape)}"
        )
    if packed.scales.shape != (K // packed.group_size, N) or packed.zeros.shape != packed.scales.shape:
        raise ValueError(f"scales and zeros must be {(K // packed.group_size, N)}")
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if max(x.shape[0], N, K) > MAX_COORD // 2:
        raise ValueError(f"a dimension exceeds 2**30 ({tuple(x.shape)} @ {packed.shape}): indices are int32")


def choose_path(M: int) -> str:
    """The dispatch rule: the CUDA-core GEMV for single rows, the fused tensor-core kernel (swap_ab.py)
    above, dequantised slabs and the fp16 matmul for prefill batches."""
    if M <= GEMV_MAX_M:
        return "gemv"
    return "dot" if M < SLAB_MIN_M else "slab"


def dequantize_columns(packed: QuantizedWeight, first: int, out: torch.Tensor, cfg: dict) -> None:
    """``out`` (K, c) = ``dequantize(W)[first:first + c].T`` in ``out``'s dtype (row stride free)."""
    (N, K), cols = packed.shape, out.shape[1]
    dequantize_columns_kernel[(triton.cdiv(cols, cfg["BLOCK_N"]), triton.cdiv(K, cfg["BLOCK_K"]))](
        packed.data,
        packed.scales,
        packed.zeros,
        out,
        N,
        K,
        first,
        cols,
        out.stride(0),
        BITS=packed.bits,
        GROUP=packed.group_size,
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_K=cfg["BLOCK_K"],
        num_warps=cfg["num_warps"],
    )


def _matmul_by_slabs(x: torch.Tensor, packed: QuantizedWeight, out: torch.Tensor, cfg: dict) -> None:
    """``out[:, slab] = x @ dequantize(W)[slab].T``, slab by slab through one reused buffer."""
    K, N = x.shape[1], packed.shape[0]
    width = cfg["COLUMNS"]
    slab = torch.empty((K, width), dtype=x.dtype, device=x.device)  # reused: one slab alive at a time
    for first in range(0, N, width):
        cols = min(width, N - first)
        dequantize_columns(packed, first, slab[:, :cols], cfg)
        matmul(x, slab[:, :cols], out=out[:, first : first + cols])  # this slab's block of columns


def quantized_matmul(
    x: torch.Tensor, packed: QuantizedWeight, *, path: str = "auto", config: dict | None = None
) -> torch.Tensor:
    """``x @ dequantize(packed).T`` for fp16/bf16 ``x`` (M, K): a new (M, N) tensor in ``x``'s dtype.

    ``path``: ``"auto"`` (:func:`choose_path`), ``"gemv"``, ``"dot"`` or
    ``"slab"`` to force one; ``config`` overrides entries of its config (the
    tuning sweep uses both). Only ``"slab"`` writes dequantised weights, one
    slab at a time (:func:`slab_config`: ``SLAB_CONFIG["BYTES"]``, or 256
    columns if K is longer than that holds), never the whole weight when it
    is larger.
    """
    check_inputs(x, packed, path)
    check_forward_only("quantized_matmul", x=x)
    x = x if x.stride(1) == 1 else x.contiguous()  # (1)!
    (M, K), N = x.shape, packed.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return out
    path = choose_path(M) if path == "auto" else path
    if path == "slab":
        overrides = check_config(config, {**SLAB_CONFIG, "COLUMNS": 256})
        _matmul_by_slabs(x, packed, out, slab_config(N, K, x.element_size(), packed, overrides))
    elif path == "dot":
        overrides = check_config(config, SWAP_AB_CONFIGS[2**31], min_block=16, auto=("SPLIT_K",))
        swap_ab_matmul(x, packed, out, swap_ab_config(M, x.dtype, packed, overrides))  # (2)!
    else:
        overrides = check_config(config, GEMV_CONFIGS[8], auto=("BLOCK_K", "SPLIT_K", "PROGRAMS_PER_SM", "num_warps"))
        _gemv(x, packed, out, gemv_config(M, N, K, packed, overrides))
    return out


def _gemv(x: torch.Tensor, packed: QuantizedWeight, out: torch.Tensor, cfg: dict) -> None:
    """``out = x @ dequantize(packed).T`` by :func:`qgemv_kernel`, one program per row and column block."""
    (M, K), N = x.shape, packed.shape[0]
    if M > MAX_GEMV_ROWS:
        raise ValueError(
            f"the GEMV takes at most {MAX_GEMV_ROWS} rows (one program per row), got M = {M}: use path='dot' or 'auto'"
        )
    k_per_split, split = k_slices(K, cfg["BLOCK_K"], cfg["SPLIT_K"])
    partials = slice_outputs(out, split)  # (3)!
    qgemv_kernel[(triton.cdiv(N, cfg["BLOCK_N"]), split, M)](
        x,
        packed.data,
        packed.scales,
        packed.zeros,
        partials,
        M,
        N,
        K,
        k_per_split,
        x.stride(0),
        N,
        N,
        M * N,
        N,
        BITS=packed.bits,
        GROUP=packed.group_size,
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_K=cfg["BLOCK_K"],
        SPLIT_K=split,
        EVEN_K=K % cfg["BLOCK_K"] == 0,
        EVEN_N=N % cfg["BLOCK_N"] == 0,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )
    sum_slices(partials, out)  # (4)!


# --8<-- [end:launcher]


# --8<-- [start:error_bound]
UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: 2.0**-24}


def kernel_error_bound(x: torch.Tensor, packed: QuantizedWeight, dtype: torch.dtype) -> torch.Tensor:
    """Per-element bound on |kernel − x·dequantize(W)ᵀ| (float64, (M, N)).

    The dequantised weight is exact in fp32 for fp16/bf16 scales (fp32 scales
    round it once, 2⁻²⁴ relative, well inside the accumulation term) and is
    rounded once to the activations' dtype before the tensor-core dot
    (relative error u each); the fp32 accumulation adds at most
    (K/16 + 16)·2⁻²² relative to Σ|x·w| (tensor cores add 16 products per
    step, with truncation); the output is rounded once (u relative to |y|).
    """
    u = UNIT_ROUNDOFF[dtype]
    w = dequantize(packed).double().to(x.device)
    x64 = x.double()
    magnitude = x64.abs() @ w.abs().T  # Σ_k |x_k w_k|
    K = packed.shape[1]
    accumulation = (K / 16 + 16) * 2.0**-22
    return (u + accumulation) * magnitude + u * (x64 @ w.T).abs()


def quantization_error_bound(x: torch.Tensor, packed: QuantizedWeight) -> torch.Tensor:
    """Worst case of |x·dequantize(W)ᵀ − x·Wᵀ| (M, N): every weight off by at most s/2, all errors aligned."""
    N, K = packed.shape
    half_step = (packed.scales.double() / 2).repeat_interleave(packed.group_size, dim=0).to(x.device)  # (K, N)
    return x.double().abs() @ half_step


def quantization_error_rms(x: torch.Tensor, packed: QuantizedWeight) -> torch.Tensor:
    """Expected RMS of the same error when rounding errors are independent and uniform on [−s/2, s/2]:
    sqrt(Σ_k x_k² s_k² / 12), which grows as √K."""
    step2 = (packed.scales.double() ** 2).repeat_interleave(packed.group_size, dim=0).to(x.device)
    return torch.sqrt((x.double() ** 2) @ step2 / 12)


# --8<-- [end:error_bound]


# --8<-- [start:roofline]
def decode_bytes(M: int, N: int, K: int, bits: int, group_size: int, act_size: int = 2, meta_size: int = 2) -> int:
    """Minimal traffic of one call: packed codes, scales and zeros, x (M·K) and the output (M·N)."""
    return N * K * bits // 8 + 2 * N * (K // group_size) * meta_size + (M * K + M * N) * act_size


def speedup_bound(M: int, N: int, K: int, bits: int, group_size: int) -> float:
    """How much faster a memory-bound call can be than with fp16 weights: the ratio of the bytes."""
    fp16_bytes = N * K * 2 + (M * K + M * N) * 2
    return fp16_bytes / decode_bytes(M, N, K, bits, group_size)


# --8<-- [end:roofline]


if __name__ == "__main__":
    torch.manual_seed(0)
    for bits, group, M, path in [(4, 128, 1, "gemv"), (8, 64, 3, "dot"), (4, None, 20, "dot")]:
        w = torch.randn(48, 256, device=DEVICE)
        packed = quantize(w, bits, group)
        x = torch.randn(M, 256, device=DEVICE, dtype=torch.float16)
        y = quantized_matmul(x, packed, path=path)
        exact = x.double() @ dequantize(packed).double().T
        worst = ((y.double() - exact).abs() / kernel_error_bound(x, packed, x.dtype)).max().item()
        print(f"int{bits} group {group} M={M} via {path}: error / bound = {worst:.2f}")
        assert worst <= 1
    print(f"memory-bound speed-up bound, int4 g128 at 8192x8192: {speedup_bound(1, 8192, 8192, 4, 128):.2f}x")
