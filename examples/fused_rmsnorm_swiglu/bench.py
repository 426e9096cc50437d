"""Benchmark spec for fused RMSNorm + SwiGLU: bf16, forward and forward+backward,
x of shape (M, 2N) at Llama MLP widths, against the unfused pair."""

import importlib.util

from academy.bench.models import PREFILL_TOKENS, glu_widths
from academy.bench.peers import compiled, eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.fused_rmsnorm_swiglu.kernel import reference, rmsnorm_swiglu, unfused_academy, unfused_torch


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    m, n = case.params["M"], case.params["N"]
    x = random_tensor((m, 2 * n), case.dtype, device=device)
    weight = random_tensor(2 * n, case.dtype, device=device, scale=0.1, offset=1.0)
    return x, weight


# --8<-- [start:work]
FUSED_PASSES = {"fwd": 3, "fwd+bwd": 8}
"""In units of M·N values: forward reads x (2) and writes out (1); backward reads
x (2) and dout (1) and writes dx (2). rstd, weight and dweight are O(M + N)."""
UNFUSED_PASSES = {"fwd": 7, "fwd+bwd": 18}
"""RMSNorm reads x (2), writes y (2); SwiGLU reads y (2), writes out (1): 7.
Backward: SwiGLU reads a, b, dout (3), writes da, db (2); RMSNorm reads x, dy (4),
writes dx (2): 11 more."""


TWO_KERNEL_PASSES = {"fwd": 3, "fwd+bwd": 11}
"""What the shipped kernels actually move when a half is wider than
MAX_ONE_PASS_BWD_HALF: the backward's first kernel reads x and dout (3) for
the row dot products, the second reads them again and writes dx (5)."""


def bytes_moved(case: Case) -> float:
    """The fused op's minimal traffic (every provider is measured against it)."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    return FUSED_PASSES[case.mode] * case.params["M"] * case.params["N"] * element_size


# --8<-- [end:work]


MODEL_ROWS = PREFILL_TOKENS[-1]
"""Tokens of the model-zoo sweep: 16384, a training micro-batch of 8 sequences of 2048."""
_WIDTHS = glu_widths()  # every distinct gated MLP width of the zoo (academy.bench.models), dense and expert


def _academy_unfused():
    """Our rms_norm then our swiglu, once the rms_norm chapter exists."""
    return unfused_academy if importlib.util.find_spec("examples.rms_norm") is not None else None


SPEC = BenchSpec(
    slug="fused_rmsnorm_swiglu",
    metric="bandwidth",
    sweeps=[
        Sweep("M=8192", x="N", shapes=[{"M": 8192, "N": n} for n in (4096, 11008, 14336)]),
        Sweep(
            f"models M={MODEL_ROWS}",
            x="N",
            shapes=[{"M": MODEL_ROWS, "N": w.value} for w in _WIDTHS],
            labels=[w.label for w in _WIDTHS],
        ),
    ],
    dtypes=[torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference,
    providers={
        "academy": lambda: rmsnorm_swiglu,
        "academy:unfused": _academy_unfused,
        "eager": eager(unfused_torch),
        "compile": compiled(unfused_torch),
    },
    headline=[
        ("fwd", {"M": 8192, "N": 14336}, "bfloat16"),
        ("fwd+bwd", {"M": 8192, "N": 14336}, "bfloat16"),
    ],
)
