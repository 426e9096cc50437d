"""Answers to the RoPE exercises.

* ``to_half_split(w, n_heads)``: the row permutation that lets a q or k
  projection trained with the interleaved convention (GPT-J, Meta's original
  Llama) run with the half-split kernel of this chapter, and
  ``rope_interleaved_reference``, the convention it converts from.
* ``rope_partial(q, k, cos, sin)``: RoPE on the first ``rotary_dim`` features of
  each head only (GPT-NeoX's ``rotary_pct``, Phi-2's ``partial_rotary_factor``),
  with the chapter's kernel reading strided views.

``tests/rope/test_exercises.py`` checks them against PyTorch.
"""

from __future__ import annotations

import torch

from examples.rope.kernel import rope


# --8<-- [start:to_half_split]
def to_half_split(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of a (n_heads·D, hidden) q or k projection reordered, head by head, from interleaved
    pairs (2i, 2i+1) to half-split pairs (i, i + D/2): the even rows of a head first, then the odd."""
    rows, hidden = w.shape
    return w.view(n_heads, rows // n_heads // 2, 2, hidden).transpose(1, 2).reshape(rows, hidden)


def rope_interleaved_reference(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """The interleaved convention on x (..., S, D): pairs (x_2i, x_2i+1) as complex numbers times e^{i·pos·θ_i}."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D)
    angles = positions.to(torch.float64)[..., None] * theta  # (S, D/2)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2).to(x.dtype)


# --8<-- [end:to_half_split]


# --8<-- [start:rope_partial]
def rope_partial(q, k, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE on the first ``rotary_dim = cos.shape[-1]`` features of every head; the rest pass through."""
    r = cos.shape[-1]
    q_rot, k_rot = rope(q[..., :r], k[..., :r], cos, sin)  # strided views: unit stride on the last dim
    return torch.cat((q_rot, q[..., r:]), dim=-1), torch.cat((k_rot, k[..., r:]), dim=-1)


# --8<-- [end:rope_partial]
