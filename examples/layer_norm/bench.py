"""Benchmark spec for layer norm: bf16, forward and forward+backward (dx, dW, dB)."""

import dataclasses

from academy.bench.models import PREFILL_TOKENS, hidden_sizes
from academy.bench.models import sweep as zoo_sweep
from academy.bench.peers import compiled, eager, liger
from academy.bench.spec import Case
from academy.testing import random_tensor

import torch
import torch.nn.functional as F

from examples.layer_norm.kernel import layer_norm, reference
from examples.norms.bench import norm_spec

EPS = 1e-5


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    m, n = case.params["M"], case.params["N"]
    x = random_tensor((m, n), case.dtype, device=device, scale=0.5, offset=-2.3)
    weight = random_tensor((n,), case.dtype, device=device, scale=0.1, offset=1.0)
    bias = random_tensor((n,), case.dtype, device=device, scale=0.1)
    return x, weight, bias


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal HBM traffic of one call.

    fwd: read x, write y (2·M·N elements), read weight and bias (2·N), write
    mean and rstd (2·M fp32). fwd+bwd adds: read x and dy, write dx (3·M·N),
    read mean and rstd (2·M fp32), read weight, write dW and dB (3·N). The
    fp32 partial rows of the two-stage reduction are our overhead, not part of
    the minimum: they show up as lost roofline, not as extra credit.
    """
    m, n = case.params["M"], case.params["N"]
    s = torch.empty((), dtype=case.dtype).element_size()
    fwd = 2 * m * n * s + 2 * n * s + 2 * m * 4
    if case.mode == "fwd":
        return fwd
    return fwd + 3 * m * n * s + 2 * m * 4 + 3 * n * s


# --8<-- [end:work]


def torch_layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


def _locks():
    from examples.layer_norm_locks.kernel import layer_norm as locks_layer_norm

    return locks_layer_norm


SPEC = norm_spec(
    "layer_norm",
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=reference,
    providers={
        "academy": lambda: layer_norm,
        "academy:locks": _locks,
        "eager": eager(torch_layer_norm),
        "compile": compiled(torch_layer_norm),
        "liger": liger("LigerLayerNormFunction", lambda apply: lambda x, w, b: apply(x, w, b, EPS)),
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
