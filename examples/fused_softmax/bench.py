"""Benchmark spec for fused softmax: bf16, forward and forward+backward."""

from academy.bench.models import head_counts, most_shared, vocabularies
from academy.bench.peers import compiled, eager, liger
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.fused_softmax.kernel import reference, softmax


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    return (random_tensor((case.params["M"], case.params["N"]), case.dtype, device=device),)


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal traffic: forward reads x and writes y (2 passes);
    backward reads y and dy and writes dx (3 more passes)."""
    element_size = torch.empty((), dtype=case.dtype).element_size()
    passes = {"fwd": 2, "fwd+bwd": 5}[case.mode]
    return passes * case.params["M"] * case.params["N"] * element_size


# --8<-- [end:work]


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


VOCAB_ROWS = 4096
"""Rows of the vocabulary sweep: the logits of 4096 tokens."""
SCORE_LENGTHS = (1024, 4096)
"""Sequence lengths of the attention-score sweep: rows of S scores, one per query per head."""
_VOCABS = vocabularies()  # the zoo's distinct vocabularies (academy.bench.models)
_HEADS = most_shared(head_counts())  # the head count most of the zoo's models share

MODEL_SWEEPS = [
    Sweep(
        f"models M={VOCAB_ROWS}",
        x="N",
        shapes=[{"M": VOCAB_ROWS, "N": v.value} for v in _VOCABS],
        labels=[v.label for v in _VOCABS],
    ),
    Sweep(
        "models scores",
        x="N",
        shapes=[{"M": _HEADS.value * s, "N": s} for s in SCORE_LENGTHS],  # one sequence of one layer, every head
        labels=[f"{_HEADS.value} heads: {_HEADS.label}"] * len(SCORE_LENGTHS),
    ),
]

SPEC = BenchSpec(
    slug="fused_softmax",
    metric="bandwidth",
    sweeps=[
        Sweep("M=8192", x="N", shapes=[{"M": 8192, "N": n} for n in (1024, 4096, 16384, 32768)]),
        Sweep("M=4096", x="N", shapes=[{"M": 4096, "N": 2**p} for p in range(8, 17)]),
        *MODEL_SWEEPS,
    ],
    dtypes=[torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference,
    providers={
        "academy": lambda: softmax,
        "eager": eager(torch_softmax),
        "compile": compiled(torch_softmax),
        "liger": liger("LigerSoftmaxFunction"),
    },
    headline=[
        ("fwd", {"M": 8192, "N": 4096}, "bfloat16"),
        ("fwd", {"M": 8192, "N": 16384}, "bfloat16"),
        ("fwd+bwd", {"M": 8192, "N": 4096}, "bfloat16"),
    ],
)
