"""Benchmark spec for GeGLU (tanh form, the one Liger and Gemma use): bf16, forward and
forward+backward, Llama MLP widths. Same byte model as SwiGLU."""

import torch
import torch.nn.functional as F

from academy.bench.peers import compiled, eager, liger
from academy.bench.spec import BenchSpec, Sweep
from examples.geglu.kernel import geglu, reference
from examples.swiglu.bench import WIDTHS, bytes_moved, make_inputs

APPROXIMATE = "tanh"


def academy_geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return geglu(gate, up, APPROXIMATE)


def torch_geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.gelu(gate, approximate=APPROXIMATE) * up


def tanh_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return reference(gate, up, APPROXIMATE)


SPEC = BenchSpec(
    slug="geglu",
    metric="bandwidth",
    sweeps=[
        Sweep("M=8192", x="N", shapes=[{"M": 8192, "N": n} for n in WIDTHS]),
    ],
    dtypes=[torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=tanh_reference,
    providers={
        "academy": lambda: academy_geglu,
        "eager": eager(torch_geglu),
        "compile": compiled(torch_geglu),
        "liger": liger("LigerGELUMulFunction"),
    },
    headline=[
        ("fwd", {"M": 8192, "N": 14336}, "bfloat16"),
        ("fwd+bwd", {"M": 8192, "N": 14336}, "bfloat16"),
    ],
)
