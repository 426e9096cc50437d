"""Benchmark spec for SwiGLU: bf16, forward and forward+backward, Llama MLP widths."""

from academy.bench.models import PREFILL_TOKENS, glu_widths
from academy.bench.peers import compiled, eager, liger
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch
import torch.nn.functional as F

from examples.swiglu.kernel import reference, swiglu

WIDTHS = (4096, 11008, 14336)  # intermediate sizes of Llama-style MLPs
MODEL_ROWS = PREFILL_TOKENS[-1]
"""Tokens of the model-zoo sweep: 16384, a training micro-batch of 8 sequences of 2048."""
_WIDTHS = glu_widths()  # every distinct gated MLP width of the zoo (academy.bench.models), dense and expert


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    shape = (case.params["M"], case.params["N"])
    return random_tensor(shape, case.dtype, device=device, scale=2.0), random_tensor(shape, case.dtype, device=device)


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal traffic of a gated element-wise op, in passes over M·N values:
    forward reads gate and up and writes out (3); the backward then reads gate,
    up and dout and writes dgate and dup (5 more)."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    passes = {"fwd": 3, "fwd+bwd": 8}[case.mode]
    return passes * case.params["M"] * case.params["N"] * element_size


# --8<-- [end:work]


def torch_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


SPEC = BenchSpec(
    slug="swiglu",
    metric="bandwidth",
    sweeps=[
        Sweep("M=8192", x="N", shapes=[{"M": 8192, "N": n} for n in WIDTHS]),
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
        "academy": lambda: swiglu,
        "eager": eager(torch_swiglu),
        "compile": compiled(torch_swiglu),
        "liger": liger("LigerSiLUMulFunction"),
    },
    headline=[
        ("fwd", {"M": 8192, "N": 14336}, "bfloat16"),
        ("fwd+bwd", {"M": 8192, "N": 14336}, "bfloat16"),
    ],
)
