"""Benchmark spec for the grouped GEMM chapter: the expert projections of two MoE models.

* ``Mixtral-8x7B``: 8 experts, top-2, hidden 4096, expert width 14336: the
  up projection (K = 4096, N = 14336) and the down projection (K = 14336,
  N = 4096) of 4096 tokens, T = 8192 rows, about 1000 rows per expert:
  compute-bound.
* ``DeepSeek-V3``: 256 fine-grained experts, top-8, hidden 7168, expert width
  2048, the same two projections of 4096 tokens, T = 32768 rows, about 128
  rows per expert: every expert's weight must still be read, and the weight
  bytes bound the time.

Each shape twice: balanced routing (each token's top-k of random scores) and
skewed routing (half the tokens all pick expert 0, a quarter of the experts
get none). The routing is drawn from a generator seeded per case, so every
run and every provider sees the same group sizes. bf16, forward and
forward+backward, TFLOP/s against the measured matmul ceiling.

Peers: a Python loop of cuBLAS matmuls, one per expert (it reads the sizes on
the host, so it is timed from the host); ``torch._grouped_mm`` where the
installed torch has it (CUTLASS grouped GEMM, bf16 on Hopper); and a padded
batched matmul, ``torch.bmm`` over the experts with every group padded to the
largest (it reads the largest size on the host).
"""

from __future__ import annotations

import functools

from academy.bench.models import model
from academy.bench.peers import host_synchronising
from academy.bench.spec import BenchSpec, Case, Sweep

import torch

from examples.grouped_gemm.kernel import flops, grouped_matmul, reference
from examples.grouped_gemm.stages import (
    grouped_matmul_loop,
    grouped_matmul_persistent,
    grouped_matmul_static,
)

TOKENS = 4096
"""Tokens of one batch; each is routed to top_k experts, so T = TOKENS · top_k rows."""
MODELS = ("Mixtral-8x7B", "DeepSeek-V3")


# --8<-- [start:routing]
def routed_group_sizes(tokens: int, experts: int, top_k: int, skewed: bool, seed: int) -> torch.Tensor:
    """Rows per expert when each token picks its top-k experts by random scores (on the CPU, seeded).

    Skewed: the first half of the tokens all pick expert 0, and the last quarter of the experts get
    no token at all, as a router early in training or on a narrow batch can do.
    """
    scores = torch.rand(tokens, experts, generator=torch.Generator().manual_seed(seed))
    if skewed:
        scores[: tokens // 2, 0] += 2.0  # above every other score: always in those tokens' top-k
        scores[:, experts - experts // 4 :] = -1.0  # below every other score: never picked
    chosen = scores.topk(top_k, dim=1).indices
    return torch.bincount(chosen.flatten(), minlength=experts)


# --8<-- [end:routing]


def _shape(name: str, projection: str, skewed: int) -> dict[str, int]:
    m = model(name)
    K, N = (m.hidden, m.expert_intermediate) if projection == "up" else (m.expert_intermediate, m.hidden)
    return {
        "T": TOKENS * m.experts_per_token,
        "E": m.experts,
        "K": K,
        "N": N,
        "top_k": m.experts_per_token,
        "skewed": skewed,
    }


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    T, E, K, N, top_k, skewed = (case.params[k] for k in ("T", "E", "K", "N", "top_k", "skewed"))
    sizes = routed_group_sizes(T // top_k, E, top_k, bool(skewed), seed=E + 1000 * skewed)
    x = torch.empty((T, K), dtype=case.dtype, device=device).normal_()  # drawn in the dtype: w can be 7.5 GB
    w = torch.empty((E, K, N), dtype=case.dtype, device=device).normal_()
    return x, w, sizes.to(device)


# --8<-- [start:work]
def work(case: Case) -> float:
    """2·T·K·N FLOPs forward; the backward adds two grouped GEMMs of the same count (dX and dW)."""
    T, K, N = (case.params[k] for k in ("T", "K", "N"))
    return float(flops(T, K, N) * (3 if case.mode == "fwd+bwd" else 1))


# --8<-- [end:work]


# --8<-- [start:peers]
def cublas_loop(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """One cuBLAS matmul per expert on its slice of rows; ``tolist`` waits for the GPU.

    The experts' weights come from ``unbind``, whose backward stacks their gradients once.
    Indexing ``w[e]`` instead would give each expert's gradient its own zero-filled
    (E, K, N) tensor to add into: E full-size passes over dW, a cost of the indexing,
    not of the matmuls this peer stands for."""
    return torch.cat([rows @ w_e for rows, w_e in zip(x.split(group_sizes.tolist()), w.unbind(0))])


def torch_grouped_mm(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """PyTorch's grouped GEMM: ``offs`` holds each group's end row, int32, computed on the device."""
    return torch._grouped_mm(x, w, offs=torch.cumsum(group_sizes, 0, dtype=torch.int32))


def _grouped_mm_loader():
    if not hasattr(torch, "_grouped_mm"):
        return None
    return torch_grouped_mm


MAX_PADDING = 8
"""``padded_bmm`` refuses a batch of more than this many times the routed rows: past it the
padded batch mostly multiplies zeros (DeepSeek-V3 with skewed routing: all 256 experts padded
to the rows of the one that takes half the tokens), and nobody would call it there."""


def padded_bmm(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Scatter each group's rows into an (E, longest group, K) batch, ``torch.bmm``, gather back."""
    T, E = x.shape[0], w.shape[0]
    longest = int(group_sizes.max())  # the padded batch's shape needs the size on the host
    if E * longest > MAX_PADDING * max(T, 1):
        raise ValueError(f"padding {E} groups to {longest} rows is over {MAX_PADDING} times the {T} rows")
    group = torch.repeat_interleave(torch.arange(E, device=x.device), group_sizes, output_size=T)
    slot = torch.arange(T, device=x.device) - (torch.cumsum(group_sizes, 0) - group_sizes)[group]
    padded = x.new_zeros((E, longest, x.shape[1])).index_put((group, slot), x)
    return torch.bmm(padded, w)[group, slot]


# --8<-- [end:peers]


SWEEPS = [
    Sweep(
        name,
        x="N",
        shapes=[_shape(name, projection, skewed) for projection in ("up", "down") for skewed in (0, 1)],
        labels=[
            f"{name} expert {projection}, {routing}"
            for projection in ("up", "down")
            for routing in ("balanced", "skewed")
        ],
    )
    for name in MODELS
]

SPEC = BenchSpec(
    slug="grouped_gemm",
    metric="compute",
    sweeps=SWEEPS,
    dtypes=[torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=work,
    reference=reference,
    providers={
        "academy": lambda: grouped_matmul,
        "grouped_mm": _grouped_mm_loader,
        "cublas_loop": lambda: host_synchronising(cublas_loop),
        "padded_bmm": lambda: host_synchronising(padded_bmm),
        "academy:loop": lambda: host_synchronising(grouped_matmul_loop),  # reads the sizes on the host
        "academy:static": lambda: grouped_matmul_static,
        "academy:persistent": lambda: grouped_matmul_persistent,
        "academy:pointer": lambda: functools.partial(grouped_matmul, path="pointer"),  # what TMA adds
    },
    quick_shapes=1,
    headline=[
        ("fwd", _shape("Mixtral-8x7B", "up", 0), "bfloat16"),
        ("fwd+bwd", _shape("Mixtral-8x7B", "up", 0), "bfloat16"),
        ("fwd", _shape("DeepSeek-V3", "up", 0), "bfloat16"),
        ("fwd+bwd", _shape("DeepSeek-V3", "down", 1), "bfloat16"),
    ],
)
