"""Benchmark spec for the learnable swish: bf16, forward and forward+backward, M=4096 rows."""

from academy.bench.peers import compiled, eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.backward_pass.kernel import reference, swish


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    m, n = case.params["M"], case.params["N"]
    return random_tensor((m, n), case.dtype, device=device), random_tensor((n,), case.dtype, device=device)


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal traffic, counting only the (M, N) tensors (w and dw are N values):
    forward reads x and writes y (2 passes); backward reads x and dy and writes dx (3 more)."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    passes = {"fwd": 2, "fwd+bwd": 5}[case.mode]
    return passes * case.params["M"] * case.params["N"] * element_size


# --8<-- [end:work]


def torch_swish(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(w * x)


SPEC = BenchSpec(
    slug="backward_pass",
    metric="bandwidth",
    sweeps=[Sweep("M=4096", x="N", shapes=[{"M": 4096, "N": n} for n in (1024, 2048, 4096, 8192)])],
    dtypes=[torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference,
    providers={
        "academy": lambda: swish,
        "eager": eager(torch_swish),
        "compile": compiled(torch_swish),
    },
    headline=[("fwd+bwd", {"M": 4096, "N": 4096}, "bfloat16")],
)
