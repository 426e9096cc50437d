"""The benchmark cases the LayerNorm and RMSNorm chapters share, so that their
tables line up: bf16 rows of Llama-like widths, and many short rows."""

from academy.bench.spec import BenchSpec, Sweep

import torch

SWEEPS = [
    Sweep("M=8192", x="N", shapes=[{"M": 8192, "N": n} for n in (1024, 4096, 8192, 16384)]),
    # Many short rows, packed several to a tile. The torch.compile peer recompiles for every
    # case, fwd and fwd+bwd, and a full bench of both chapters must fit one GPU round.
    Sweep("M=65536", x="N", shapes=[{"M": 65536, "N": 512}]),
]

HEADLINE = [
    ("fwd", {"M": 8192, "N": 4096}, "bfloat16"),
    ("fwd", {"M": 8192, "N": 16384}, "bfloat16"),
    ("fwd+bwd", {"M": 8192, "N": 4096}, "bfloat16"),
]


def norm_spec(slug: str, **fields) -> BenchSpec:
    """A bandwidth-bound spec over the shared cases; ``fields`` are the chapter's own
    (inputs, bytes model, reference, providers)."""
    return BenchSpec(
        slug=slug,
        metric="bandwidth",
        sweeps=SWEEPS,
        dtypes=[torch.bfloat16],
        modes=["fwd", "fwd+bwd"],
        headline=HEADLINE,
        **fields,
    )
