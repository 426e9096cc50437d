"""Benchmark spec for dropout: seeded (ours), explicit mask (ours), PyTorch eager with the mask given.

Every provider is checked against ``reference`` before it is timed, and a
random op can only pass that check if it draws the same mask. So:

* ``academy``: ``dropout(x, P, SEED)``, the mask regenerated in the backward;
* ``explicit_mask``: our kernel that writes the mask to memory, reads it in
  the forward and keeps it for the backward (same Philox mask);
* ``eager``: PyTorch eager, ``torch.where(keep, x * scale, 0)``, with the
  same mask handed to it as an input: it is *not charged* for generating the
  mask, which favours it.

``torch.nn.functional.dropout`` draws from PyTorch's own generator, so its
output can never match the reference; it is left out rather than timed
unchecked (see the tutorial).
"""

from academy.bench.peers import eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.dropout.kernel import dropout, explicit_mask_dropout, keep_mask_reference, reference

P = 0.1
SEED = 20240917


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    n = case.params["n"]
    x = random_tensor((n,), case.dtype, device=device)
    keep = keep_mask_reference(n, P, SEED, device).to(torch.uint8)  # only the eager peer reads it
    return x, keep


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal traffic: forward reads x and writes y (2 passes); backward
    reads dy and writes dx (2 more). No mask is counted: the seeded kernel
    moves none, so the explicit-mask provider's mask bytes show up as lost
    bandwidth."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    passes = {"fwd": 2, "fwd+bwd": 4}[case.mode]
    return passes * case.params["n"] * element_size


# --8<-- [end:work]


def _torch_with_given_mask(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.where(keep.bool(), x * (1.0 / (1.0 - P)), 0.0)


SPEC = BenchSpec(
    slug="dropout",
    metric="bandwidth",
    sweeps=[Sweep("1-D", x="n", shapes=[{"n": 2**k} for k in (20, 22, 24, 26, 28)])],
    dtypes=[torch.bfloat16, torch.float32],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=lambda x, keep: reference(x, P, SEED),
    providers={
        "academy": lambda: lambda x, keep: dropout(x, P, SEED),
        "explicit_mask": lambda: lambda x, keep: explicit_mask_dropout(x, P, SEED),
        "eager": eager(_torch_with_given_mask),
    },
    headline=[
        ("fwd", {"n": 2**28}, "bfloat16"),
        ("fwd+bwd", {"n": 2**28}, "bfloat16"),
    ],
)
