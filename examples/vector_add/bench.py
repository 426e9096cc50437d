"""Benchmark spec for vector addition: bandwidth over sizes 2^12 … 2^28."""

from academy.bench.peers import eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.vector_add.kernel import add, reference


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    n = case.params["n"]
    return random_tensor(n, case.dtype, device=device), random_tensor(n, case.dtype, device=device)


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Read x and y, write out: three passes over n elements."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    return 3 * case.params["n"] * element_size


# --8<-- [end:work]


SPEC = BenchSpec(
    slug="vector_add",
    metric="bandwidth",
    sweeps=[Sweep("fp32 vectors", x="n", shapes=[{"n": 2**p} for p in range(12, 29, 2)])],
    dtypes=[torch.float32],
    modes=["fwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference,
    providers={"academy": lambda: add, "torch": eager(torch.add)},
    quick_shapes=9,
    headline=[("fwd", {"n": 2**28}, "float32")],
)
