"""Benchmark spec for the tutorial matmul: what grouped program order buys.

Three providers on the same inputs: our kernel with grouped tile order
(``GROUP_SIZE_M = 8``), the *same* kernel in row-major tile order
(``GROUP_SIZE_M = 1``), and cuBLAS through ``torch.matmul``. Forward only;
the runner checks each against the fp32 reference before timing it.
"""

from academy.bench.peers import eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.tiled_matmul.kernel import matmul, reference


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    M, N, K = (case.params[k] for k in ("M", "N", "K"))
    return random_tensor((M, K), case.dtype, device=device), random_tensor((K, N), case.dtype, device=device)


# --8<-- [start:work]
def flops(case: Case) -> float:
    """C = A·B with A (M, K), B (K, N): M·N dot products of length K,
    each K multiplies and K adds: 2·M·N·K floating-point operations."""
    return 2.0 * case.params["M"] * case.params["N"] * case.params["K"]


# --8<-- [end:work]


def row_major(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return matmul(a, b, group_size_m=1)


SPEC = BenchSpec(
    slug="tiled_matmul",
    metric="compute",
    sweeps=[
        Sweep("square", x="N", shapes=[{"M": n, "N": n, "K": n} for n in (1024, 2048, 4096, 6144, 8192)]),
        Sweep("tall, N=K=4096", x="M", shapes=[{"M": 32768, "N": 4096, "K": 4096}]),
    ],
    dtypes=[torch.float16, torch.bfloat16],
    modes=["fwd"],
    make_inputs=make_inputs,
    work=flops,
    reference=reference,
    providers={
        "academy": lambda: matmul,
        "row-major": lambda: row_major,
        "torch": eager(torch.matmul),
    },
    headline=[
        ("fwd", {"M": 4096, "N": 4096, "K": 4096}, "float16"),
        ("fwd", {"M": 8192, "N": 8192, "K": 8192}, "bfloat16"),
    ],
)
