"""Benchmark spec for GeLU (tanh form): our fused kernel against three ways of writing it in PyTorch.

* ``naive``: the formula op by op (nine kernels, 21 passes over memory);
* ``eager``: PyTorch's built-in ``F.gelu(x, approximate="tanh")`` (one kernel);
* ``compile``: ``torch.compile`` of the naive function (Inductor fuses it into
  one generated Triton kernel).
"""

from academy.bench.peers import compiled, eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch
import torch.nn.functional as F

from examples.gelu.kernel import gelu, naive_gelu_tanh, reference


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    return (random_tensor((case.params["M"], case.params["N"]), case.dtype, device=device, scale=2.0),)


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal traffic of any GeLU: read x once, write y once (2 passes)."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    return 2 * case.params["M"] * case.params["N"] * element_size


# --8<-- [end:work]


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return gelu(x, approximate="tanh")


def reference_tanh(x: torch.Tensor) -> torch.Tensor:
    return reference(x, approximate="tanh")


def builtin_gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


SIZES = (1024, 2048, 4096, 8192, 16384)  # 16384² is the size of the lecture's case study

SPEC = BenchSpec(
    slug="gelu",
    metric="bandwidth",
    sweeps=[Sweep("square", x="N", shapes=[{"M": n, "N": n} for n in SIZES])],
    dtypes=[torch.bfloat16],
    modes=["fwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference_tanh,
    providers={
        "academy": lambda: gelu_tanh,
        "naive": eager(naive_gelu_tanh),
        "eager": eager(builtin_gelu_tanh),
        "compile": compiled(naive_gelu_tanh),
    },
    quick_shapes=2,
    headline=[("fwd", {"M": 16384, "N": 16384}, "bfloat16")],
)
