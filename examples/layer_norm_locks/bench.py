"""Benchmark spec for the tutorial layer norm: bf16, M=4096 rows, forward and forward+backward."""

from academy.bench.peers import compiled, eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch
import torch.nn.functional as F

from examples.layer_norm_locks.kernel import layer_norm, reference


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    m, n = case.params["M"], case.params["N"]
    x = random_tensor((m, n), case.dtype, device=device, scale=0.5, offset=-2.3)
    weight = random_tensor((n,), case.dtype, device=device, scale=0.1, offset=1.0)
    bias = random_tensor((n,), case.dtype, device=device, scale=0.1)
    return x, weight, bias


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal traffic of the (M, N) tensors: forward reads x, writes y (2 passes);
    backward reads x and dy, writes dx (3 more). Weights, mean/rstd and the
    partial buffers are small next to them and not counted."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    passes = {"fwd": 2, "fwd+bwd": 5}[case.mode]
    return passes * case.params["M"] * case.params["N"] * element_size


# --8<-- [end:work]


def torch_layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias)


SPEC = BenchSpec(
    slug="layer_norm_locks",
    metric="bandwidth",
    sweeps=[
        Sweep("M=4096", x="N", shapes=[{"M": 4096, "N": n} for n in (1024, 2048, 3072, 4096, 5120, 8192, 12288, 16384)])
    ],
    dtypes=[torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference,
    providers={
        "academy": lambda: layer_norm,
        "eager": eager(torch_layer_norm),
        "compile": compiled(torch_layer_norm),
    },
    headline=[("fwd+bwd", {"M": 4096, "N": 4096}, "bfloat16")],
)
