"""Benchmark spec for the attention chapter: head size 128, 16 heads, 32768 tokens per batch.

* ``D=128 causal`` / ``D=128 full``: S ∈ {1024, 4096, 16384} with B = 32768 / S,
  H = 16, forward and forward+backward, fp16 and bf16, TFLOP/s against the
  measured matmul ceiling. On Hopper the op's backward is the Gluon kernel,
  and so is its forward at full attention; ``academy:triton`` is the same op
  held to the Triton kernels (``path="tma"``), in both sweeps.
* ``short causal``: S = 256 (B = 128), where the naive whole-row kernel still
  fits on chip. The stages are timed there and in the causal sweep.

The peers are PyTorch's ``scaled_dot_product_attention`` forced onto one
backend each: FlashAttention-2 (``sdpa_flash``) and cuDNN (``sdpa_cudnn``).
The backend is chosen inside the timed call, so a forward+backward is timed
with the backward of the same backend.

The inputs are q, k, v and a one-element CPU tensor that says whether the case
is causal (1: full, 2: causal; never 0, as the spec test wants no zero input).
The runner passes only tensors to the ops, and a CPU flag is read without a
device sync, so the call stays capturable in a CUDA graph.
"""

from __future__ import annotations

import functools
import math

from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch
from torch.utils.checkpoint import checkpoint

from examples.flash_attention.kernel import attention, attention_flops, causal_mask
from examples.flash_attention.stages import STAGES

TOKENS = 32768
HEADS = 16


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    S, D = case.params["S"], case.params["D"]
    batch = TOKENS // S if device == "cuda" else 1  # the CPU spec test runs one sequence under the interpreter
    q, k, v = (random_tensor((batch, HEADS, S, D), case.dtype, device=device) for _ in range(3))
    return q, k, v, torch.tensor(1 + case.params["causal"])  # 1: full, 2: causal; the flag stays on the CPU


# --8<-- [start:work]
def work(case: Case) -> float:
    """4·B·H·S²·D FLOPs forward (QKᵀ and P·V, 2 FLOPs per multiply-add), half when causal;
    forward+backward adds the backward's 5 matmuls: 3.5× the forward."""
    S, D = case.params["S"], case.params["D"]
    return attention_flops(TOKENS // S, HEADS, S, S, D, bool(case.params["causal"]), case.mode)


# --8<-- [end:work]


def _rows_reference(q_rows, k, v, first_row, s_q, causal, scale):
    scores = q_rows.float() @ k.float().transpose(-1, -2) * scale
    if causal:
        mask = causal_mask(s_q, k.shape[2], q_rows.device)[first_row : first_row + q_rows.shape[2]]
        scores = scores.masked_fill(~mask, -math.inf)
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q_rows.dtype)


def reference(q, k, v, mask_kind) -> torch.Tensor:
    """The definition in fp32, 1024 query rows at a time with each chunk checkpointed, so that
    neither the forward nor the backward holds the whole S×S matrix (16384² scores × 32 heads)."""
    causal, scale, chunk = int(mask_kind) == 2, 1.0 / math.sqrt(q.shape[-1]), 1024
    outs = [
        checkpoint(_rows_reference, q[:, :, r : r + chunk], k, v, r, q.shape[2], causal, scale, use_reentrant=False)
        for r in range(0, q.shape[2], chunk)
    ]
    return torch.cat(outs, dim=2)


def ours(op):
    return lambda: lambda q, k, v, mask_kind: op(q, k, v, causal=int(mask_kind) == 2)


def sdpa(backend_name: str):
    """SDPA with one backend forced, entered inside the timed callable."""

    def load():
        if not torch.cuda.is_available():
            return None
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)

        def call(q, k, v, mask_kind):
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=int(mask_kind) == 2)

        return call

    return load


STAGE_PROVIDERS = [f"academy:{name}" for name in STAGES]
PEERS = ["sdpa_flash", "sdpa_cudnn"]


def _shapes(lengths, d, causal):
    return [{"S": s, "D": d, "causal": int(causal)} for s in lengths]


SWEEPS = [
    Sweep(
        "D=128 full",
        x="S",
        shapes=_shapes((1024, 4096, 16384), 128, False),
        metric="compute",
        providers=["academy", *PEERS, "academy:triton"],
    ),
    Sweep(
        "D=128 causal",
        x="S",
        shapes=_shapes((1024, 4096, 16384), 128, True),
        metric="compute",
        providers=["academy", *PEERS, "academy:flash", "academy:triton"],
    ),
    Sweep(
        "short causal",
        x="S",
        shapes=_shapes((256,), 128, True),
        metric="compute",
        providers=["academy", *PEERS, "academy:naive", "academy:flash"],
    ),
]

SPEC = BenchSpec(
    slug="flash_attention",
    metric="compute",
    sweeps=SWEEPS,
    dtypes=[torch.float16, torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=work,
    reference=reference,
    providers={
        "academy": ours(attention),
        "sdpa_flash": sdpa("FLASH_ATTENTION"),
        "sdpa_cudnn": sdpa("CUDNN_ATTENTION"),
        **{f"academy:{name}": ours(op) for name, op in STAGES.items()},
        "academy:triton": ours(functools.partial(attention, path="tma")),
    },
    headline=[
        ("fwd", {"S": 4096, "D": 128, "causal": 0}, "bfloat16"),
        ("fwd", {"S": 16384, "D": 128, "causal": 1}, "bfloat16"),
        ("fwd+bwd", {"S": 4096, "D": 128, "causal": 1}, "bfloat16"),
    ],
)
