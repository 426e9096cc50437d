"""Benchmark spec for the attention chapter: head size 128, 16 heads, 32768 tokens per batch.

* ``D=128 causal`` / ``D=128 full``: S ∈ {1024, 4096, 16384} with B = 32768 / S,
  H = 16, forward and forward+backward, fp16 and bf16, TFLOP/s against the
  measured matmul ceiling. On Hopper the op's backward is the Gluon kernel,
  and so is its forward at full attention; ``academy:triton`` is the same op
  held to the Triton kernels (``path="tma"``), in both sweeps.
* ``short causal``: S = 256 (B = 128), where the naive whole-row kernel still
  fits on chip. The stages are timed there and in the causal sweep.
* ``models …``: the model zoo's attention shapes (``academy.bench.models``,
  labelled with their models), bf16 only, ours against the peers: every
  distinct (heads H, key/value heads KV, head size D) at S = 4096, causal; then
  the most common one over S from 1k to 32k (one S = 3000, a multiple of no
  tile), causal and full. Still 32768 tokens per batch.
* ``D=64 …`` / ``D=256 …``: the other two head sizes, each at a zoo model's
  (H, KV, D) (Llama-3.2-1B; Gemma-2-9B), causal at S ∈ {1024, 3000, 16384}
  and full at S = 16384, bf16, ours against the peers. SDPA's flash backend
  may not take D = 256; the runner then records it under "Not measured".
* ``GQA …``: grouped-query attention at D = 128, causal, S = 16384: the zoo's
  most common (H, KV) with 4 query heads per key/value head (Llama-3.1-8B …)
  and with 8 (Llama-3.1-70B …), bf16, ours against the peers.

The peers are PyTorch's ``scaled_dot_product_attention`` forced onto one
backend each: FlashAttention-2 (``sdpa_flash``) and cuDNN (``sdpa_cudnn``).
The backend is chosen inside the timed call, so a forward+backward is timed
with the backward of the same backend.

The inputs are q, k, v and a one-element CPU tensor that says whether the case
is causal (1: full, 2: causal; never 0, as the spec test wants no zero input).
The runner passes only tensors to the ops, and a CPU flag is read without a
device sync, so the call stays capturable in a CUDA graph.
"""

from __future__ import annotations

import functools
import math

from academy.bench.models import RAGGED_TOKENS, Shared, attention_configs, most_shared
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch
from torch.utils.checkpoint import checkpoint

from examples.flash_attention.kernel import HEAD_DIMS, attention, attention_flops, causal_mask
from examples.flash_attention.stages import STAGES

TOKENS = 32768
HEADS = 16


def heads(case: Case) -> tuple[int, int]:
    """(query heads, key/value heads): HEADS and HEADS, unless the shape names them (the model-zoo sweeps)."""
    h = case.params.get("H", HEADS)
    return h, case.params.get("KV", h)


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    S, D = case.params["S"], case.params["D"]
    H, KV = heads(case)
    batch = TOKENS // S if device == "cuda" else 1  # the CPU spec test runs one sequence under the interpreter
    q = random_tensor((batch, H, S, D), case.dtype, device=device)
    k, v = (random_tensor((batch, KV, S, D), case.dtype, device=device) for _ in range(2))
    return q, k, v, torch.tensor(1 + case.params["causal"])  # 1: full, 2: causal; the flag stays on the CPU


# --8<-- [start:work]
def work(case: Case) -> float:
    """4·B·H·S²·D FLOPs forward (QKᵀ and P·V, 2 FLOPs per multiply-add), half when causal;
    forward+backward adds the backward's 5 matmuls: 3.5× the forward."""
    S, D = case.params["S"], case.params["D"]
    return attention_flops(TOKENS // S, heads(case)[0], S, S, D, bool(case.params["causal"]), case.mode)


# --8<-- [end:work]


def _rows_reference(q_rows, k, v, first_row, s_q, causal, scale):
    scores = q_rows.float() @ k.float().transpose(-1, -2) * scale
    if causal:
        mask = causal_mask(s_q, k.shape[2], q_rows.device)[first_row : first_row + q_rows.shape[2]]
        scores = scores.masked_fill(~mask, -math.inf)
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q_rows.dtype)


def reference(q, k, v, mask_kind) -> torch.Tensor:
    """The definition in fp32, 1024 query rows at a time with each chunk checkpointed, so that
    neither the forward nor the backward holds the whole S×S matrix (16384² scores × 32 heads).
    Grouped-query attention: each key/value head serves H / H_kv consecutive query heads."""
    causal, scale, chunk = int(mask_kind) == 2, 1.0 / math.sqrt(q.shape[-1]), 1024
    if k.shape[1] != q.shape[1]:
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    outs = [
        checkpoint(_rows_reference, q[:, :, r : r + chunk], k, v, r, q.shape[2], causal, scale, use_reentrant=False)
        for r in range(0, q.shape[2], chunk)
    ]
    return torch.cat(outs, dim=2)


def ours(op):
    return lambda: lambda q, k, v, mask_kind: op(q, k, v, causal=int(mask_kind) == 2)


def sdpa(backend_name: str):
    """SDPA with one backend forced, entered inside the timed callable."""

    def load():
        if not torch.cuda.is_available():
            return None
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)

        def call(q, k, v, mask_kind):
            gqa = k.shape[1] != q.shape[1]  # grouped-query attention: ask the backend for it
            try:
                with sdpa_kernel(backend):
                    return torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=int(mask_kind) == 2, **({"enable_gqa": True} if gqa else {})
                    )
            except RuntimeError as refused:  # "No available kernel": the backend does not take this shape
                raise NotImplementedError(f"{backend_name}: {refused}".splitlines()[0]) from None

        return call

    return load


STAGE_PROVIDERS = [f"academy:{name}" for name in STAGES]
PEERS = ["sdpa_flash", "sdpa_cudnn"]


def _shapes(lengths, d, causal):
    return [{"S": s, "D": d, "causal": int(causal)} for s in lengths]


SWEEPS = [
    Sweep(
        "D=128 full",
        x="S",
        shapes=_shapes((1024, 4096, 16384), 128, False),
        metric="compute",
        providers=["academy", *PEERS, "academy:triton"],
    ),
    Sweep(
        "D=128 causal",
        x="S",
        shapes=_shapes((1024, 4096, 16384), 128, True),
        metric="compute",
        providers=["academy", *PEERS, "academy:flash", "academy:triton"],
    ),
    Sweep(
        "short causal",
        x="S",
        shapes=_shapes((256,), 128, True),
        metric="compute",
        providers=["academy", *PEERS, "academy:naive", "academy:flash"],
    ),
]

_CONFIGS = attention_configs(head_dims=HEAD_DIMS)
"""The zoo's distinct (heads, kv heads, head dim) (academy.bench.models) at the head dims the kernel
takes: Phi-3-mini (96) and DeepSeek-V3 (latent attention, 192/128) are left out."""
_COMMON = most_shared(_CONFIGS)  # (32, 8, 128): Llama-3.1-8B, Mistral-7B, Mixtral, Mistral-Nemo, Qwen3-8B
MODEL_S = 4096
MODEL_LENGTHS = ((1024, 1), (RAGGED_TOKENS, 1), (32768, 1), (4096, 0), (32768, 0))
"""(S, causal) of the length sweep: 1k to 32k, one length no tile divides, causal and full."""


def _zoo_shape(config, S: int, causal: int) -> dict[str, int]:
    return {"S": S, "D": config.head_dim, "causal": causal, "H": config.heads, "KV": config.kv_heads}


def _config_of(model_name: str) -> Shared:
    """The zoo's (heads, kv heads, head dim) that this model has, labelled with every model that shares it."""
    return next(c for c in _CONFIGS if model_name in c.models)


def _most_shared_group(group: int, head_dim: int) -> Shared:
    """The most common (heads, kv heads) with ``group`` query heads per key/value head, at this head dim."""
    return most_shared(
        [c for c in _CONFIGS if c.value.head_dim == head_dim and c.value.heads == group * c.value.kv_heads]
    )


HEAD_DIM_MODELS = {64: "Llama-3.2-1B", 256: "Gemma-2-9B"}
"""The model whose (heads, kv heads) each of the other head sizes is timed at."""
HEAD_DIM_LENGTHS = ((1024, 1), (RAGGED_TOKENS, 1), (16384, 1), (16384, 0))
"""(S, causal) of the head-size sweeps: causal from 1k to 16k, one length no tile divides, and full at 16k."""
GQA_GROUPS, GQA_S = (4, 8), 16384


def _zoo_sweep(name: str, x: str, shapes: list[dict[str, int]], labels: list[str]) -> Sweep:
    """A sweep of model-zoo shapes: bf16, TFLOP/s, ours against SDPA's two backends."""
    return Sweep(
        name,
        x=x,
        shapes=shapes,
        labels=labels,
        metric="compute",
        providers=["academy", *PEERS],
        dtypes=[torch.bfloat16],
    )


def _causal_sweep(name: str, configs: list[Shared], S: int) -> Sweep:
    """One causal shape per model-zoo configuration, all at sequence length ``S``."""
    return _zoo_sweep(name, "H", [_zoo_shape(c.value, S, 1) for c in configs], [c.label for c in configs])


def _head_dim_sweep(d: int) -> Sweep:
    config = _config_of(HEAD_DIM_MODELS[d])
    return _zoo_sweep(
        f"D={d} H={config.value.heads}, KV={config.value.kv_heads}",
        "S",
        [_zoo_shape(config.value, S, causal) for S, causal in HEAD_DIM_LENGTHS],
        [config.label] * len(HEAD_DIM_LENGTHS),
    )


_GQA = [_most_shared_group(g, 128) for g in GQA_GROUPS]

HEAD_DIM_SWEEPS = [
    *(_head_dim_sweep(d) for d in HEAD_DIM_MODELS),
    _causal_sweep(f"GQA D=128 S={GQA_S} causal", _GQA, GQA_S),
]

MODEL_SWEEPS = [
    _causal_sweep(f"models S={MODEL_S} causal", _CONFIGS, MODEL_S),
    _zoo_sweep(
        f"models H={_COMMON.value.heads}, KV={_COMMON.value.kv_heads}, D={_COMMON.value.head_dim}",
        "S",
        [_zoo_shape(_COMMON.value, S, causal) for S, causal in MODEL_LENGTHS],
        [_COMMON.label] * len(MODEL_LENGTHS),
    ),
]

SPEC = BenchSpec(
    slug="flash_attention",
    metric="compute",
    sweeps=[*SWEEPS, *MODEL_SWEEPS, *HEAD_DIM_SWEEPS],
    dtypes=[torch.float16, torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=work,
    reference=reference,
    providers={
        "academy": ours(attention),
        "sdpa_flash": sdpa("FLASH_ATTENTION"),
        "sdpa_cudnn": sdpa("CUDNN_ATTENTION"),
        **{f"academy:{name}": ours(op) for name, op in STAGES.items()},
        "academy:triton": ours(functools.partial(attention, path="tma")),
    },
    headline=[
        ("fwd", {"S": 4096, "D": 128, "causal": 0}, "bfloat16"),
        ("fwd", {"S": 16384, "D": 128, "causal": 1}, "bfloat16"),
        ("fwd+bwd", {"S": 4096, "D": 128, "causal": 1}, "bfloat16"),
    ],
)
