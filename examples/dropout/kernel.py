"""Dropout with a seed instead of a stored mask, forward and backward.

``dropout(x, p, seed)`` zeroes each element with probability ``p`` and scales
the survivors by ``1/(1 - p)``. Whether element ``i`` survives is decided by
Philox, a counter-based generator: ``u = tl.rand(seed, i)``, keep when
``u >= p``. The same ``(seed, i)`` always gives the same ``u``, so the
backward regenerates the mask instead of reading it from memory.

``explicit_mask_dropout`` is the classic version kept for comparison: a mask
in memory, written once, read by the forward and kept for the backward.

``reference`` recomputes the same Philox stream in plain PyTorch integer
arithmetic, so tests check our generator bit for bit against an independent
implementation.

Run this file (``python -m examples.dropout.kernel``) for a quick check.
"""

from __future__ import annotations

from academy import DEVICE
from academy.validation import as_int, as_real, check_tensor

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
BLOCK_SIZE = 1024
NUM_WARPS = 4
MAX_SEED = 2**63 - 1
CHUNK = 2**24
"""Elements per piece of the PyTorch Philox reference (bounds its int64 temporaries)."""


# --8<-- [start:reference]
_M32 = 0xFFFFFFFF
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57  # Philox4x32 multipliers
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85  # Weyl increments of the key
_TO_UNIT = 4.6566127342e-10  # ≈ 2**-31: a non-negative int32 to [0, 1)


def _mul_wide(a: int, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32 bits of the 64-bit product ``a · b`` (both < 2**32), in int64."""
    p_hi = (a >> 16) * b  # < 2**48: no int64 overflow
    p_lo = (a & 0xFFFF) * b
    high = (p_hi + (p_lo >> 16)) >> 16
    low = (((p_hi & 0xFFFF) << 16) + p_lo) & _M32
    return high, low


def philox_uniform(seed: int, n: int, device: str | torch.device = "cpu", start: int = 0) -> torch.Tensor:
    """``tl.rand(seed, arange(start, start + n))`` in PyTorch: Philox4x32-10, first word, as fp32 in [0, 1)."""
    counter = torch.arange(start, start + n, dtype=torch.int64, device=device)
    c0, c1 = counter & _M32, counter >> 32  # the counter is the element's index
    c2 = c3 = torch.zeros_like(c0)
    k0, k1 = seed & _M32, (seed >> 32) & _M32  # the key is the seed
    for _ in range(10):
        hi_b, lo_b = _mul_wide(_ROUND_B, c2)
        hi_a, lo_a = _mul_wide(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    signed = torch.where(c0 >= 2**31, c0 - 2**32, c0)  # reinterpret as int32
    positive = torch.where(signed < 0, ~signed, signed)  # 0 .. 2**31 - 1
    return positive.to(torch.float32) * torch.tensor(_TO_UNIT, dtype=torch.float32, device=device)


def keep_mask_reference(n: int, p: float, seed: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """Which of ``n`` elements survive, in chunks so 2**28 elements fit in memory."""
    chunk = CHUNK
    threshold = torch.tensor(p, dtype=torch.float32, device=device)
    parts = []
    for start in range(0, n, chunk):
        u = philox_uniform(seed, min(chunk, n - start), device, start)
        parts.append(u >= threshold)
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.bool, device=device)


def reference(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """Dropout with the Philox mask of ``seed``, computed by PyTorch in fp32; differentiable."""
    keep = keep_mask_reference(x.numel(), p, seed, x.device).view(x.shape)
    scale = torch.tensor(1.0 / (1.0 - p), dtype=torch.float32, device=x.device)
    return torch.where(keep, x.float() * scale, 0.0).to(x.dtype)


# --8<-- [end:reference]


# --8<-- [start:explicit_kernel]
@triton.jit
def explicit_mask_dropout_kernel(x_ptr, keep_ptr, y_ptr, n_elements, scale, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_bounds = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_bounds).to(tl.float32)
    keep = tl.load(keep_ptr + offsets, mask=in_bounds) != 0  # (1)!
    y = tl.where(keep, x * scale, 0.0)  # (2)!
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=in_bounds)


# --8<-- [end:explicit_kernel]


# --8<-- [start:seeded_kernel]
@triton.jit
def seeded_dropout_kernel(x_ptr, y_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # (1)!
    in_bounds = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_bounds).to(tl.float32)
    u = tl.rand(seed, offsets)  # (2)!
    keep = u >= p  # (3)!
    y = tl.where(keep, x * scale, 0.0)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=in_bounds)


@triton.jit
def keep_mask_kernel(keep_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    """The mask alone, one byte per element: what the explicit version stores."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    keep = tl.rand(seed, offsets) >= p
    tl.store(keep_ptr + offsets, keep.to(tl.uint8), mask=offsets < n_elements)


# --8<-- [end:seeded_kernel]


# --8<-- [start:launcher]
def check_inputs(x: torch.Tensor, p: float, seed: int) -> tuple[float, int]:
    """Checks, and returns ``p`` and ``seed`` as a Python float and int (NumPy scalars are welcome)."""
    check_tensor("x", x, SUPPORTED_DTYPES)
    p, seed = as_real("p", p), as_int("seed", seed)
    if not 0.0 <= p < 1.0:  # (1)!
        raise ValueError(f"p must be in [0, 1), got {p}")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**63 - 1], got {seed}")
    return p, seed


def _grid(n: int) -> tuple[int]:
    return (triton.cdiv(n, BLOCK_SIZE),)


def _seeded(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    x_flat = x.contiguous().view(-1)  # (2)!
    y = torch.empty(x_flat.shape, dtype=x.dtype, device=x.device)
    if x_flat.numel():
        seeded_dropout_kernel[_grid(x_flat.numel())](
            x_flat,
            y,
            x_flat.numel(),
            float(p),
            1.0 / (1.0 - p),
            int(seed),
            BLOCK_SIZE=BLOCK_SIZE,
            num_warps=NUM_WARPS,
        )
    return y.view(x.shape)


def keep_mask(n: int, p: float, seed: int, device: str | torch.device = DEVICE) -> torch.Tensor:
    """The survivors of ``dropout(x, p, seed)`` for an ``x`` of ``n`` elements, as uint8 0/1."""
    keep = torch.empty(n, dtype=torch.uint8, device=device)
    if n:
        keep_mask_kernel[_grid(n)](keep, n, float(p), int(seed), BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return keep


def _apply_mask(x: torch.Tensor, keep: torch.Tensor, p: float) -> torch.Tensor:
    x_flat = x.contiguous().view(-1)
    y = torch.empty(x_flat.shape, dtype=x.dtype, device=x.device)
    if x_flat.numel():
        explicit_mask_dropout_kernel[_grid(x_flat.numel())](
            x_flat, keep, y, x_flat.numel(), 1.0 / (1.0 - p), BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS
        )
    return y.view(x.shape)


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class _SeededDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
        ctx.p, ctx.seed = p, seed  # (1)!
        return _seeded(x, p, seed)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        dx = dropout(dy, ctx.p, ctx.seed)  # (2)!
        return dx, None, None  # (3)!


def dropout(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """Zero each element with probability ``p`` (decided by ``seed``), scale the rest by ``1/(1-p)``."""
    p, seed = check_inputs(x, p, seed)
    if x.requires_grad and torch.is_grad_enabled():
        return _SeededDropout.apply(x, p, seed)
    return _seeded(x, p, seed)


# --8<-- [end:autograd]


# --8<-- [start:explicit_autograd]
class _ExplicitMaskDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
        keep = keep_mask(x.numel(), p, seed, x.device)  # n bytes written
        ctx.save_for_backward(keep)  # (1)!
        ctx.p = p
        return _apply_mask(x, keep, p)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return _MaskScale.apply(dy, keep, ctx.p), None, None  # linear in dy: differentiable again


class _MaskScale(torch.autograd.Function):
    """``x`` times the kept mask over ``1 - p``: its own backward, so every order of derivative is right."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, p: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.p = p
        return _apply_mask(x, keep, p)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return _MaskScale.apply(dy, keep, ctx.p), None, None


def explicit_mask_dropout(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """The same result as ``dropout``, with the mask materialised and kept for the backward."""
    p, seed = check_inputs(x, p, seed)
    if x.requires_grad and torch.is_grad_enabled():
        return _ExplicitMaskDropout.apply(x, p, seed)
    return _apply_mask(x, keep_mask(x.numel(), p, seed, x.device), p)


# --8<-- [end:explicit_autograd]


if __name__ == "__main__":
    x = torch.randn(3, 1001, device=DEVICE, requires_grad=True)
    y = dropout(x, 0.3, seed=1234)
    y.backward(torch.ones_like(y))
    expected = reference(x.detach(), 0.3, 1234)
    kept = (y != 0).float().mean().item()
    same = torch.equal(y.detach(), expected) and torch.equal(x.grad != 0, expected != 0)
    print(f"dropout on {DEVICE}: kept {kept:.3f} (expected 0.7), matches the PyTorch Philox reference: {same}")
    assert same
