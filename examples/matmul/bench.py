"""Benchmark spec for the matmul chapter: squares, Llama-like shapes, decode shapes.

* ``square``: M = N = K from 1024 to 8192, compute-bound, TFLOP/s against
  the measured matmul ceiling; every stage of the chapter is timed here.
* ``llama M=…, K=…``: a projection of a Llama-like layer (hidden 4096, MLP
  14336) for a prefill batch of M ∈ {128, 4096} tokens, x = N.
* ``decode M=…, K=…``: the same weights for M ∈ {1, 16} tokens: the weight
  read is almost all the traffic, so the metric is GB/s against the copy
  ceiling, the work being the bytes of A, B and C.
* ``models M=…``: projections of real models (``academy.bench.models``,
  labelled with the models that have them) at M ∈ {1, 16} (GB/s) and
  {128, 3000} (TFLOP/s) tokens, fp16 only, ours against cuBLAS.

Forward only; the runner checks every provider against the fp32 reference.
"""

import functools

from academy.bench.models import DECODE_TOKENS, PROJECTION_PICKS, RAGGED_TOKENS, projections
from academy.bench.peers import eager
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

import examples.tiled_matmul.kernel  # noqa: F401 - listed so the results hash covers the k_loop/grouped stages
from examples.matmul.kernel import matmul, reference
from examples.matmul.stages import STAGES

SQUARES = (1024, 2048, 4096, 8192)
LLAMA_KN = (4096, 14336)


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    M, N, K = (case.params[k] for k in ("M", "N", "K"))
    return random_tensor((M, K), case.dtype, device=device), random_tensor((K, N), case.dtype, device=device)


# --8<-- [start:work]
def work(case: Case) -> float:
    """Compute sweeps: 2·M·N·K FLOPs (a multiply and an add per term).
    Bandwidth sweeps: the bytes of A (M·K), B (K·N) and C (M·N), each read or written once."""
    M, N, K = (case.params[k] for k in ("M", "N", "K"))
    if case.metric == "compute":
        return 2.0 * M * N * K
    element_size = torch.empty((), dtype=case.dtype).element_size()
    return float((M * K + K * N + M * N) * element_size)


# --8<-- [end:work]


STAGE_PROVIDERS = [f"academy:{name}" for name in STAGES]
FINAL_PROVIDERS = ["academy", "cublas", "academy:persistent", "academy:split_k"]

MODEL_TOKENS = (*DECODE_TOKENS, 128, RAGGED_TOKENS)
"""Tokens of the model-zoo sweeps: decode (1, 16: bandwidth-bound), a short prefill (128) and a
prefill of 3000 tokens, a multiple of no tile (compute-bound)."""
_PROJECTIONS = projections(kinds=PROJECTION_PICKS)  # weights of the zoo (academy.bench.models), labelled


def _model_sweep(m: int) -> Sweep:
    """The picked projections of the zoo at M tokens: y = x·Wᵀ for x (M × K) and W (N × K), timed
    as A·B with A = x and B = Wᵀ, in fp16, ours against cuBLAS."""
    return Sweep(
        f"models M={m}",
        x="N",
        shapes=[{"M": m, "N": p.value.N, "K": p.value.K} for p in _PROJECTIONS],
        labels=[p.label for p in _PROJECTIONS],
        metric="bandwidth" if m in DECODE_TOKENS else "compute",
        providers=["academy", "cublas"],
        dtypes=[torch.float16],
    )


SWEEPS = [
    Sweep(
        "square",
        x="N",
        shapes=[{"M": n, "N": n, "K": n} for n in SQUARES],
        metric="compute",
        providers=["academy", "cublas", *STAGE_PROVIDERS],
    ),
    *[
        Sweep(
            f"llama M={m}, K={k}",
            x="N",
            shapes=[{"M": m, "N": n, "K": k} for n in LLAMA_KN],
            metric="compute",
            providers=FINAL_PROVIDERS,
        )
        for m in (128, 4096)
        for k in LLAMA_KN
    ],
    *[
        Sweep(
            f"decode M={m}, K={k}",
            x="N",
            shapes=[{"M": m, "N": n, "K": k} for n in LLAMA_KN],
            metric="bandwidth",
            providers=[*FINAL_PROVIDERS, "academy:gemv", "academy:no_pdl"],
        )
        for m in (1, 16)
        for k in LLAMA_KN
    ],
    *[_model_sweep(m) for m in MODEL_TOKENS],
]


def _stage(name):
    return lambda: STAGES[name]


SPEC = BenchSpec(
    slug="matmul",
    metric="compute",
    sweeps=SWEEPS,
    dtypes=[torch.float16, torch.bfloat16],
    modes=["fwd"],
    make_inputs=make_inputs,
    work=work,
    reference=reference,
    providers={
        "academy": lambda: matmul,
        "cublas": eager(torch.matmul),
        **{f"academy:{name}": _stage(name) for name in STAGES},
        "academy:gemv": lambda: functools.partial(matmul, path="gemv"),  # the CUDA-core GEMV kernel, forced
        "academy:no_pdl": lambda: functools.partial(matmul, config={"PDL": False}),  # what dependent launch buys
    },
    headline=[
        ("fwd", {"M": 4096, "N": 4096, "K": 4096}, "float16"),
        ("fwd", {"M": 8192, "N": 8192, "K": 8192}, "bfloat16"),
        ("fwd", {"M": 4096, "N": 14336, "K": 4096}, "bfloat16"),
        ("fwd", {"M": 1, "N": 4096, "K": 4096}, "bfloat16"),
        ("fwd", {"M": 16, "N": 14336, "K": 4096}, "bfloat16"),
    ],
)
