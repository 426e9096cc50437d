"""Fused linear cross entropy: the loss of ``hidden @ weight.T`` without the full logits.

The ``(T, V)`` logits of a language model's last layer are the largest
activation of a training step (8192 tokens × 128,256 words in bf16 are 2 GB,
and their gradient as much again). This driver never holds them: it walks the
tokens in chunks; for each chunk it computes the chunk's logits with cuBLAS,
runs the chapter's cross-entropy kernel, which writes the chunk's gradient
over those logits, and immediately turns that gradient into the chunk's
``d hidden`` and its share of ``d weight``. All of it happens in the forward;
``backward`` only scales by ``grad_output`` (skipped on the device when it is 1).

No Triton here: the kernels live in ``kernel.py``; this file is the chunking driver.
"""

from __future__ import annotations

import numbers

from academy.validation import check_tensor

import numpy as np
import torch
import torch.nn.functional as F

from examples.cross_entropy.kernel import (
    SUPPORTED_DTYPES,
    _forward,
    check_options,
    count_valid,
    reduce_losses,
    refuse_double_backward,
    scale_by_grad_output,
    transform_logits,
)


# --8<-- [start:reference]
def reference(
    hidden, weight, target, ignore_index=-100, reduction="mean", label_smoothing=0.0, softcap=None, logit_scale=None
):
    """Materialise the logits in fp32, then PyTorch's cross entropy."""
    z = hidden.float() @ weight.float().T if hidden.dtype != torch.float64 else hidden @ weight.T
    z = transform_logits(z, softcap, logit_scale)
    loss = F.cross_entropy(z, target, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    return loss.to(hidden.dtype)


# --8<-- [end:reference]


# --8<-- [start:chunk_size]
CHUNK_BYTES = 256 * 2**20
"""Target size of one chunk's logits (1024 rows at V = 128,256 in bf16). Fewer, larger
chunks mean fewer read-modify-write passes over ``d weight`` (one per chunk), but a
larger peak; the tuning sweep times 128 to 512 MiB."""


def chunk_rows(n_rows: int, n_cols: int, element_size: int) -> int:
    """Tokens per chunk: logits of about ``CHUNK_BYTES``, a multiple of 128 rows (whole GEMM tiles)."""
    rows = max(128, (CHUNK_BYTES // (n_cols * element_size)) // 128 * 128)
    return min(rows, n_rows)


# --8<-- [end:chunk_size]


# --8<-- [start:driver]
def _fused_forward(hidden, weight, target, options, need_dh: bool, need_dw: bool, chunk: int | None = None):
    n_rows, n_cols = hidden.shape[0], weight.shape[0]
    ignore_index, reduction = options[0], options[1]
    need_grad = need_dh or need_dw
    chunk = chunk or chunk_rows(n_rows, n_cols, hidden.element_size())
    loss_rows = torch.empty(n_rows, dtype=torch.float32, device=hidden.device)
    grad_hidden = torch.empty_like(hidden) if need_dh else None
    grad_weight = torch.empty_like(weight) if need_dw else None  # (1)!
    n_valid = count_valid(target, ignore_index)
    for start in range(0, n_rows, chunk):
        h = hidden[start : start + chunk]
        logits = h @ weight.T  # (2)!
        rows = _forward(
            logits, target[start : start + chunk], *options, grad=logits if need_grad else None, n_valid=n_valid
        )  # (3)!
        loss_rows[start : start + chunk] = rows
        if need_dh:
            torch.matmul(logits, weight, out=grad_hidden[start : start + chunk])  # (4)!
        if need_dw and start == 0:
            torch.matmul(logits.T, h, out=grad_weight)  # (5)!
        elif need_dw:
            grad_weight.addmm_(logits.T, h)
        del logits
    return reduce_losses(loss_rows, n_valid, reduction).to(hidden.dtype), grad_hidden, grad_weight


class _FusedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, options, chunk):
        need_dh, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        loss, grad_hidden, grad_weight = _fused_forward(hidden, weight, target, options, need_dh, need_dw, chunk)
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.used = False
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        refuse_double_backward("fused_linear_cross_entropy")
        if ctx.used:
            raise RuntimeError("fused_linear_cross_entropy's backward scales saved gradients in place: it runs once")
        ctx.used = True
        grad_hidden, grad_weight = ctx.saved_tensors
        for grad in (grad_hidden, grad_weight):
            if grad is not None:
                scale_by_grad_output(grad, grad_output)  # (6)!
        return grad_hidden, grad_weight, None, None, None


# --8<-- [end:driver]


def fused_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    softcap: float | None = None,
    logit_scale: float | None = None,
    *,
    chunk: int | None = None,
) -> torch.Tensor:
    """``cross_entropy(hidden @ weight.T, target, ...)`` without materialising the ``(T, V)`` logits.

    ``hidden`` is ``(T, H)``, ``weight`` is ``(V, H)`` (an ``nn.Linear``'s
    weight, no bias), ``target`` is int64 ``(T,)``. ``reduction`` is ``"mean"``
    or ``"sum"`` (a per-token ``"none"`` loss would need every row's
    ``grad_output`` before ``d weight`` is summed). Differentiable in
    ``hidden`` and ``weight``; ``chunk`` overrides the tokens per chunk.
    """
    options = check_options(ignore_index, reduction, label_smoothing, softcap, logit_scale)
    if reduction == "none":
        raise ValueError('fused_linear_cross_entropy supports reduction "mean" or "sum", not "none"')
    check_tensor("hidden", hidden, SUPPORTED_DTYPES)
    check_tensor("weight", weight, SUPPORTED_DTYPES)
    check_tensor("target", target, (torch.int64,))
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(
            f"expected hidden (T, H) and weight (V, H), got {tuple(hidden.shape)} and {tuple(weight.shape)}"
        )
    if hidden.dtype != weight.dtype:
        raise TypeError(f"dtypes differ: hidden {hidden.dtype} vs weight {weight.dtype}")
    if target.shape != (hidden.shape[0],):
        raise ValueError(f"target must have shape ({hidden.shape[0]},), got {tuple(target.shape)}")
    if weight.shape[0] == 0 or hidden.shape[1] == 0:
        raise ValueError(f"empty vocabulary or hidden size: weight {tuple(weight.shape)}")
    if chunk is not None:
        if isinstance(chunk, (bool, np.bool_)) or not isinstance(chunk, numbers.Integral) or chunk < 1:
            raise ValueError(f"chunk must be a positive int or None, got {chunk!r}")
        chunk = int(chunk)
    hidden, weight, target = hidden.contiguous(), weight.contiguous(), target.contiguous()  # indexed densely
    if hidden.shape[0] == 0:  # no tokens: PyTorch's values, and a backward that gives zero gradients
        loss_rows = (hidden @ weight.T).float().sum(-1)
        return reduce_losses(loss_rows, count_valid(target, options[0]), reduction).to(hidden.dtype)
    if (hidden.requires_grad or weight.requires_grad) and torch.is_grad_enabled():
        return _FusedLinearCrossEntropy.apply(hidden, weight, target, options, chunk)
    return _fused_forward(hidden, weight, target, options, False, False, chunk)[0]


def unfused_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The baseline the fused op is measured against: full logits, then the chapter's ``cross_entropy``."""
    from examples.cross_entropy.kernel import cross_entropy

    return cross_entropy(hidden @ weight.T, target)


if __name__ == "__main__":
    from academy import DEVICE

    h = torch.randn(300, 64, device=DEVICE, requires_grad=True)
    w = torch.randn(1000, 64, device=DEVICE, requires_grad=True)
    t = torch.randint(0, 1000, (300,), device=DEVICE)
    fused_linear_cross_entropy(h, w, t, chunk=128).backward()
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    reference(h64, w64, t).backward()
    for name, got, want in (("hidden", h.grad, h64.grad), ("weight", w.grad, w64.grad)):
        print(f"d{name} error {((got - want).norm() / want.norm()).item():.1e}")
