"""Benchmark spec for GeGLU (tanh form, the one Liger and Gemma use): bf16, forward and
forward+backward, Llama MLP widths and every gated MLP width of the model zoo. Same cases
and byte model as SwiGLU."""

import dataclasses

from academy.bench.peers import compiled, eager, liger

import torch
import torch.nn.functional as F

import examples.swiglu.bench as swiglu_bench
from examples.geglu.kernel import geglu, reference

APPROXIMATE = "tanh"


def academy_geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return geglu(gate, up, APPROXIMATE)


def torch_geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.gelu(gate, approximate=APPROXIMATE) * up


def tanh_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return reference(gate, up, APPROXIMATE)


SPEC = dataclasses.replace(
    swiglu_bench.SPEC,  # the same cases and byte model as SwiGLU; only the op and its peers differ
    slug="geglu",
    reference=tanh_reference,
    providers={
        "academy": lambda: academy_geglu,
        "eager": eager(torch_geglu),
        "compile": compiled(torch_geglu),
        "liger": liger("LigerGELUMulFunction"),
    },
)
