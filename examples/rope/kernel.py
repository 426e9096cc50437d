"""Rotary position embeddings (RoPE), Hugging Face's half-split convention, forward and backward.

``rope(q, k, cos, sin)`` returns ``(q_embed, k_embed)`` equal to transformers'
``apply_rotary_pos_emb(q, k, cos, sin)``::

    q_embed = q * cos + rotate_half(q) * sin,   rotate_half(x) = cat(-x2, x1)

for q of shape ``(B, H_q, S, D)``, k of shape ``(B, H_kv, S, D)`` (grouped-query
attention: any ``H_kv``) and cos, sin of shape ``(B or 1, S, D)`` broadcast over
the heads. fp32, fp16 and bf16; differentiable in q and k (cos and sin are
constants of the positions: they are not differentiated, and a cos or sin that
requires grad is refused).

* one launch rotates q and k: each program owns a block of rows of one
  sequence and a range of heads of q and k, loads its rows of cos and sin once
  and reuses them for every head it rotates;
* q and k may be strided views (q from a fused QKV projection, (B, S, H, D)
  transposed) as long as the head dimension has unit stride; the outputs and
  the gradients are fresh tensors laid out in the order of their input's
  strides, never written over the inputs;
* the backward is the same kernel with the transposed rotation
  (``BACKWARD=True``): grad = dy * cos + rotate_halfᵀ(dy * sin).

Run this file (``python -m examples.rope.kernel``) for a quick check.
"""

from __future__ import annotations

from academy.validation import check_tensor  # academy before triton: see contributing.md

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# --8<-- [start:reference]
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """Hugging Face's formula (transformers' Llama), as written: cos and sin (B or 1, S, D)
    gain a heads axis and broadcast over the heads of q and k."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def reference(q, k, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
    """The formula in fp32, returned in the inputs' dtype."""
    q_embed, k_embed = apply_rotary_pos_emb(q.float(), k.float(), cos.float(), sin.float())
    return q_embed.to(q.dtype), k_embed.to(k.dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, base: float = 10000.0, dtype=torch.float32):
    """cos and sin of shape (B, S, head_dim) for integer positions (B, S), as Hugging Face's default
    rotary embedding makes them: angle pos·θ_i with θ_i = base^(-2i/D) for i < D/2, each half of
    the last dimension a copy of the other (computed in float64, returned in ``dtype``)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=positions.device) / head_dim)
    angles = positions.to(torch.float64)[..., None] * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


# --8<-- [end:reference]


# --8<-- [start:rotate_heads]
@triton.jit
def rotate_heads(
    x_ptr,  # this sequence's start in q or k (or in their gradients)
    out_ptr,
    first_head,
    n_heads,
    rows,  # [BLOCK_S] positions in the sequence
    cols,  # [BLOCK_HALF] 0, 1, ... within one half of the head
    stride_xh,
    stride_xs,
    stride_oh,
    stride_os,
    mask,  # [BLOCK_S, 1, BLOCK_HALF] rows < S and cols < D/2
    cos1,  # [BLOCK_S, 1, BLOCK_HALF] fp32, both halves of cos
    cos2,
    sin1,  # the signed sin that multiplies the other half: see rope_kernel
    sin2,
    HALF: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    heads = (first_head + tl.arange(0, BLOCK_H)).to(tl.int64)[None, :, None]  # (1)!
    mask = mask & (heads < n_heads)
    r, c = rows[:, None, None], cols[None, None, :]
    x_offsets = heads * stride_xh + r * stride_xs + c
    x1 = tl.load(x_ptr + x_offsets, mask=mask).to(tl.float32)  # (2)!
    x2 = tl.load(x_ptr + x_offsets + HALF, mask=mask).to(tl.float32)
    out_offsets = heads * stride_oh + r * stride_os + c
    y1 = x1 * cos1 + x2 * sin1  # (3)!
    y2 = x2 * cos2 + x1 * sin2
    tl.store(out_ptr + out_offsets, y1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + out_offsets + HALF, y2.to(out_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:rotate_heads]


# --8<-- [start:kernel]
@triton.jit
def rope_kernel(
    q_ptr,
    k_ptr,
    q_out_ptr,
    k_out_ptr,
    cos_ptr,
    sin_ptr,
    seq_len,
    n_q_heads,
    n_k_heads,
    n_s_blocks,
    n_groups,
    blocks_per_group,
    stride_qb,
    stride_qh,
    stride_qs,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_qob,
    stride_qoh,
    stride_qos,
    stride_kob,
    stride_koh,
    stride_kos,
    stride_cb,  # 0 when cos and sin have one batch row for every sequence
    stride_cs,  # cos and sin share their strides
    HALF: tl.constexpr,  # D / 2
    BLOCK_S: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,  # D / 2 rounded up to a power of two
    BACKWARD: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    group = pid % n_groups  # (1)!
    s_block = (pid // n_groups) % n_s_blocks
    batch = pid // (n_groups * n_s_blocks)
    rows = s_block * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_HALF)
    mask = (rows < seq_len)[:, None] & (cols < HALF)[None, :]
    cs_offsets = batch * stride_cb + rows[:, None] * stride_cs + cols[None, :]
    cos1 = tl.load(cos_ptr + cs_offsets, mask=mask).to(tl.float32)  # (2)!
    cos2 = tl.load(cos_ptr + cs_offsets + HALF, mask=mask).to(tl.float32)
    sin1 = tl.load(sin_ptr + cs_offsets, mask=mask).to(tl.float32)
    sin2 = tl.load(sin_ptr + cs_offsets + HALF, mask=mask).to(tl.float32)
    if BACKWARD:  # (3)!
        sin1, sin2 = sin2, -sin1
    else:
        sin1 = -sin1
    cos1, cos2, sin1, sin2 = cos1[:, None, :], cos2[:, None, :], sin1[:, None, :], sin2[:, None, :]
    mask = mask[:, None, :]

    n_q_blocks = tl.cdiv(n_q_heads, BLOCK_H)  # (4)!
    first = group * blocks_per_group
    last = tl.minimum(first + blocks_per_group, n_q_blocks + tl.cdiv(n_k_heads, BLOCK_H))
    q_base, q_out_base = q_ptr + batch * stride_qb, q_out_ptr + batch * stride_qob
    for block in range(first, tl.minimum(last, n_q_blocks)):  # (5)!
        rotate_heads(
            q_base, q_out_base, block * BLOCK_H, n_q_heads, rows, cols,
            stride_qh, stride_qs, stride_qoh, stride_qos,
            mask, cos1, cos2, sin1, sin2, HALF, BLOCK_H,
        )  # fmt: skip
    k_base, k_out_base = k_ptr + batch * stride_kb, k_out_ptr + batch * stride_kob
    for block in range(tl.maximum(first, n_q_blocks), last):
        rotate_heads(
            k_base, k_out_base, (block - n_q_blocks) * BLOCK_H, n_k_heads, rows, cols,
            stride_kh, stride_ks, stride_koh, stride_kos,
            mask, cos1, cos2, sin1, sin2, HALF, BLOCK_H,
        )  # fmt: skip


# --8<-- [end:kernel]


# --8<-- [start:launcher]
TILE = 2048  # values of one half-tile, BLOCK_S × BLOCK_H × BLOCK_HALF: 4 KiB of bf16 per half
MAX_BLOCK_S = 16
MIN_PROGRAMS = 1024  # split the heads over more programs below this: a few programs per SM
TOKEN_TILE_HEADS = 8  # heads per block when a position's heads lie side by side in memory
CONFIG_KEYS = ("BLOCK_S", "BLOCK_H", "HEAD_BLOCKS", "num_warps")


def pick_config(
    batch: int, seq_len: int, n_q_heads: int, n_k_heads: int, head_dim: int, heads_adjacent: bool = False
) -> dict:
    """Tile sizes, and how many blocks of heads each program rotates (``HEAD_BLOCKS``).

    ``heads_adjacent``: q's heads are closer in memory than its positions, as in a (B, S, H, D)
    projection viewed as (B, H, S, D)."""
    block_half = triton.next_power_of_2(max(head_dim // 2, 1))
    positions = batch * seq_len
    if heads_adjacent and head_dim <= 128 and positions >= MIN_PROGRAMS:  # (1)!
        block_s = 4 if head_dim <= 64 else 1
        block_h = min(TOKEN_TILE_HEADS, triton.next_power_of_2(max(n_q_heads, n_k_heads, 1)))
        every_block = triton.cdiv(n_q_heads, block_h) + triton.cdiv(n_k_heads, block_h)
        return {"BLOCK_S": block_s, "BLOCK_H": block_h, "HEAD_BLOCKS": every_block, "num_warps": 4}
    block_s = min(triton.next_power_of_2(max(seq_len, 1)), MAX_BLOCK_S, max(TILE // block_half, 1))
    block_h = max(1, min(triton.next_power_of_2(max(n_q_heads, n_k_heads, 1)), TILE // (block_s * block_half)))  # (2)!
    head_blocks = triton.cdiv(n_q_heads, block_h) + triton.cdiv(n_k_heads, block_h)
    rows = max(batch * triton.cdiv(seq_len, block_s), 1)
    per_program = max(1, triton.cdiv(head_blocks, triton.cdiv(MIN_PROGRAMS, rows)))  # (3)!
    return {"BLOCK_S": block_s, "BLOCK_H": block_h, "HEAD_BLOCKS": per_program, "num_warps": 4}


def stride_order(t: torch.Tensor) -> list[int]:
    """t's dimensions from the largest stride to the smallest, the last one (unit stride) last."""
    return sorted(range(t.dim() - 1), key=lambda d: -t.stride(d)) + [t.dim() - 1]


def empty_in_order(shape, order: list[int], dtype, device) -> torch.Tensor:
    """A fresh dense tensor of ``shape`` whose memory runs through the dimensions in ``order``."""
    dense = torch.empty([shape[d] for d in order], dtype=dtype, device=device)
    return dense.permute([order.index(d) for d in range(len(shape))])  # (4)!


def _unit_stride(t: torch.Tensor) -> torch.Tensor:
    """An incoming gradient may be expanded (stride 0 everywhere, from a .sum()): copy it then."""
    return t if t.stride(-1) == 1 else t.contiguous()


def launch_plan(q: torch.Tensor, n_k_heads: int, config: dict | None) -> tuple[dict, int, int, int]:
    """(config, sequence blocks, head groups, programs) of one launch that rotates q."""
    batch, n_q_heads, seq_len, head_dim = q.shape
    heads_adjacent = q.stride(1) < q.stride(2)
    cfg = pick_config(batch, seq_len, n_q_heads, n_k_heads, head_dim, heads_adjacent) | (config or {})
    n_s_blocks = triton.cdiv(seq_len, cfg["BLOCK_S"])
    head_blocks = triton.cdiv(n_q_heads, cfg["BLOCK_H"]) + triton.cdiv(n_k_heads, cfg["BLOCK_H"])
    n_groups = triton.cdiv(head_blocks, cfg["HEAD_BLOCKS"])
    programs = batch * n_s_blocks * n_groups
    if programs > 2**31 - 1:
        raise ValueError(f"{programs} programs: too many for one launch (at most 2**31 - 1)")
    return cfg, n_s_blocks, n_groups, programs


def _launch(q, k, cos, sin, q_out, k_out, backward: bool, config: dict | None) -> None:
    if q.numel() + k.numel() == 0:  # (5)!
        return
    cfg, n_s_blocks, n_groups, programs = launch_plan(q, k.shape[1], config)
    seq_len, head_dim = q.shape[2], q.shape[3]
    if cos.stride() != sin.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    rope_kernel[(programs,)](
        q, k, q_out, k_out, cos, sin,
        seq_len, q.shape[1], k.shape[1], n_s_blocks, n_groups, cfg["HEAD_BLOCKS"],
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        q_out.stride(0), q_out.stride(1), q_out.stride(2), k_out.stride(0), k_out.stride(1), k_out.stride(2),
        cos.stride(0) if cos.shape[0] > 1 else 0, cos.stride(1),  # (6)!
        HALF=head_dim // 2,
        BLOCK_S=cfg["BLOCK_S"],
        BLOCK_H=cfg["BLOCK_H"],
        BLOCK_HALF=triton.next_power_of_2(head_dim // 2),
        BACKWARD=backward,
        num_warps=cfg["num_warps"],
    )  # fmt: skip


def rope_forward(q, k, cos, sin, config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    q_embed = empty_in_order(q.shape, stride_order(q), q.dtype, q.device)  # (7)!
    k_embed = empty_in_order(k.shape, stride_order(k), k.dtype, k.device)
    _launch(q, k, cos, sin, q_embed, k_embed, backward=False, config=config)
    return q_embed, k_embed


def rope_backward(dq_embed, dk_embed, cos, sin, q_order, k_order, config=None) -> tuple[torch.Tensor, torch.Tensor]:
    dq_embed, dk_embed = _unit_stride(dq_embed), _unit_stride(dk_embed)
    dq = empty_in_order(dq_embed.shape, q_order, dq_embed.dtype, dq_embed.device)
    dk = empty_in_order(dk_embed.shape, k_order, dk_embed.dtype, dk_embed.device)
    _launch(dq_embed, dk_embed, cos, sin, dq, dk, backward=True, config=config)
    return dq, dk


def _check_config(config: dict | None) -> None:
    for key, value in (config or {}).items():
        if key not in CONFIG_KEYS:
            raise ValueError(f"unknown config key {key!r}; expected some of {CONFIG_KEYS}")
        if not (isinstance(value, int) and value >= 1 and (key == "HEAD_BLOCKS" or value & (value - 1) == 0)):
            raise ValueError(f"config {key}={value!r}: expected a positive int (a power of two, but HEAD_BLOCKS)")


def check_inputs(q, k, cos, sin) -> None:
    for name, t in (("q", q), ("k", k), ("cos", cos), ("sin", sin)):
        check_tensor(name, t, SUPPORTED_DTYPES)
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(
            f"q and k must be 4-D, (batch, heads, seq_len, head_dim); got q {tuple(q.shape)}, k {tuple(k.shape)}"
        )
    if cos.dim() != 3 or cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must be 3-D, of one shape (batch or 1, seq_len, head_dim); "
            f"got cos {tuple(cos.shape)}, sin {tuple(sin.shape)}"
        )
    for name, t in (("k", k), ("cos", cos), ("sin", sin)):
        if t.dtype != q.dtype:
            raise TypeError(f"dtypes differ: q {q.dtype} vs {name} {t.dtype} (q, k, cos and sin take one dtype)")
        if t.device != q.device:
            raise ValueError(f"devices differ: q on {q.device}, {name} on {t.device}")
    batch, _, seq_len, head_dim = q.shape
    if (k.shape[0], k.shape[2], k.shape[3]) != (batch, seq_len, head_dim):
        raise ValueError(
            f"k {tuple(k.shape)} and q {tuple(q.shape)} must agree in batch, seq_len and head_dim (heads may differ)"
        )
    if cos.shape[1:] != (seq_len, head_dim) or cos.shape[0] not in (1, batch):
        raise ValueError(
            f"cos and sin {tuple(cos.shape)} must be (batch or 1, seq_len, head_dim) = "
            f"({batch} or 1, {seq_len}, {head_dim}) for q {tuple(q.shape)}"
        )
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (RoPE rotates pairs of its halves), got {head_dim}")
    for name, t in (("q", q), ("k", k), ("cos", cos), ("sin", sin)):
        if t.stride(-1) != 1 and t.shape[-1] > 1:  # (8)!
            raise ValueError(
                f"{name} must have unit stride along head_dim (its last dimension), got strides {t.stride()}; "
                f"pass {name}.contiguous()"
            )
    if torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad):
        raise ValueError(
            "rope does not differentiate cos and sin (constants of the positions): pass cos.detach(), sin.detach()"
        )


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class Rope(torch.autograd.Function):
    """(q, k) -> (q_embed, k_embed); the backward rotates the incoming gradients the other way."""

    @staticmethod
    def forward(ctx, q, k, cos, sin, config):
        ctx.save_for_backward(cos, sin)  # (1)!
        ctx.orders = stride_order(q), stride_order(k)
        ctx.config = config
        return rope_forward(q, k, cos, sin, config)

    @staticmethod
    @once_differentiable  # (2)!
    def backward(ctx, dq_embed, dk_embed):
        cos, sin = ctx.saved_tensors
        dq, dk = rope_backward(dq_embed, dk_embed, cos, sin, *ctx.orders, config=ctx.config)
        return dq, dk, None, None, None


def rope(q, k, cos, sin, *, config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q_embed, k_embed)`` of Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin)``;
    differentiable in q and k. ``config`` overrides the tile sizes (for tests and tuning)."""
    check_inputs(q, k, cos, sin)
    _check_config(config)
    launch_plan(q, k.shape[1], config)  # too many programs: refused before anything is allocated
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        return Rope.apply(q, k, cos, sin, config)
    return rope_forward(q, k, cos, sin, config)


# --8<-- [end:autograd]


if __name__ == "__main__":
    from academy import DEVICE

    B, H_Q, H_KV, S, D = 2, 4, 2, 37, 64
    qkv = torch.randn(B, S, H_Q + 2 * H_KV, D, device=DEVICE, requires_grad=True)  # a fused projection
    q, k = qkv[:, :, :H_Q].transpose(1, 2), qkv[:, :, H_Q : H_Q + H_KV].transpose(1, 2)
    positions = torch.arange(S, device=DEVICE).expand(B, S)
    cos, sin = rope_cos_sin(positions, D)
    q_embed, k_embed = rope(q, k, cos, sin)
    dq_embed, dk_embed = torch.randn_like(q_embed), torch.randn_like(k_embed)
    torch.autograd.backward((q_embed, k_embed), (dq_embed, dk_embed))

    qkv64 = qkv.detach().double().requires_grad_()
    q64, k64 = qkv64[:, :, :H_Q].transpose(1, 2), qkv64[:, :, H_Q : H_Q + H_KV].transpose(1, 2)
    ref_q, ref_k = apply_rotary_pos_emb(q64, k64, *rope_cos_sin(positions, D, dtype=torch.float64))
    torch.autograd.backward((ref_q, ref_k), (dq_embed.double(), dk_embed.double()))
    errors = [
        ((a - b).norm() / b.norm()).item() for a, b in ((q_embed, ref_q), (k_embed, ref_k), (qkv.grad, qkv64.grad))
    ]
    print(f"rope on {DEVICE}, q {tuple(q.shape)} k {tuple(k.shape)} from a fused QKV view: errors q/k/dqkv")
    print("  " + " ".join(f"{e:.1e}" for e in errors))
    assert max(errors) < 1e-5
