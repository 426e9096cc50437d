"""Benchmark spec for RMS norm: bf16, forward and forward+backward (dx, dW)."""

import dataclasses

from academy.bench.models import PREFILL_TOKENS, hidden_sizes
from academy.bench.models import sweep as zoo_sweep
from academy.bench.peers import compiled, eager, liger
from academy.bench.spec import Case
from academy.testing import random_tensor

import torch
import torch.nn.functional as F

from examples.norms.bench import norm_spec
from examples.rms_norm.kernel import reference, rms_norm

EPS = 1e-6


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    m, n = case.params["M"], case.params["N"]
    x = random_tensor((m, n), case.dtype, device=device)
    weight = random_tensor((n,), case.dtype, device=device, scale=0.1, offset=1.0)
    return x, weight


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal HBM traffic of one call.

    fwd: read x, write y (2·M·N elements), read weight (N), write rstd (M
    fp32). fwd+bwd adds: read x and dy, write dx (3·M·N), read rstd (M fp32),
    read weight and write dW (2·N). The fp32 partial rows of the two-stage
    reduction are our overhead and are not counted.
    """
    m, n = case.params["M"], case.params["N"]
    s = torch.empty((), dtype=case.dtype).element_size()
    fwd = 2 * m * n * s + n * s + m * 4
    if case.mode == "fwd":
        return fwd
    return fwd + 3 * m * n * s + m * 4 + 2 * n * s


# --8<-- [end:work]


def torch_rms_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, EPS)


SPEC = norm_spec(
    "rms_norm",
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference,
    providers={
        "academy": lambda: rms_norm,
        "eager": eager(torch_rms_norm),
        "compile": compiled(torch_rms_norm),
        # in_place=False: Liger's default writes dx into dy, which the runner reuses.
        "liger": liger("LigerRMSNormFunction", lambda apply: lambda x, w: apply(x, w, EPS, 0.0, "llama", False)),
    },
)

MODEL_ROWS = PREFILL_TOKENS[-1]
"""Rows of the model-zoo sweep: 16384 tokens, a training micro-batch of 8 sequences of 2048."""

# Every distinct hidden size of the model zoo (academy.bench.models), labelled with its models, added
# here rather than in examples/norms/bench.py (whose code the results' hash covers); ``--sweep models`` runs it alone.
SPEC = dataclasses.replace(
    SPEC,
    sweeps=[
        *SPEC.sweeps,
        zoo_sweep(
            f"models M={MODEL_ROWS}",
            "N",
            hidden_sizes(),
            lambda n: {"M": MODEL_ROWS, "N": n},
            providers=("academy", "eager", "compile", "liger"),
        ),
    ],
)
