"""Benchmark spec for row sums: M = 4096 rows, N from 1024 to 262144 columns, bf16."""

from academy.bench.peers import compiled, eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.row_sum.kernel import reference, row_sum


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    return (random_tensor((case.params["M"], case.params["N"]), case.dtype, device=device),)


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Read the M×N matrix once, write M sums."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    m, n = case.params["M"], case.params["N"]
    return (m * n + m) * element_size


# --8<-- [end:work]


def torch_row_sum(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's sum: accumulates bf16 in fp32 and returns bf16, as ours does."""
    return x.sum(dim=-1)


SPEC = BenchSpec(
    slug="row_sum",
    metric="bandwidth",
    sweeps=[Sweep("M=4096", x="N", shapes=[{"M": 4096, "N": 2**p} for p in range(10, 19)])],
    dtypes=[torch.bfloat16],
    modes=["fwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference,
    providers={
        "academy": lambda: row_sum,
        "eager": eager(torch_row_sum),
        "compile": compiled(torch_row_sum),
    },
    quick_shapes=3,
    headline=[("fwd", {"M": 4096, "N": 4096}, "bfloat16"), ("fwd", {"M": 4096, "N": 262144}, "bfloat16")],
)
