"""Benchmark spec for the FP8 matmul chapter: squares and model projections, in three scale layouts.

* ``square <layout>``: M = N = K ∈ {2048, 4096, 8192}, with block scales
  (1 × 128 for ``a``, 128 × 128 for ``b``, DeepSeek-V3's), one scale per row
  (row-wise), or one per tensor. Compute-bound: TFLOP/s against the bf16
  matmul ceiling measured in the same run.
* ``models <layout> M=4096``: the picked projections of real models
  (``academy.bench.models``, labelled with the models that have them) for a
  prefill of 4096 tokens, with block and with row-wise scales.

Every case's inputs: fp8 e4m3 ``a`` (M, K) and ``b`` (N, K) with their scales
in the case's layout, quantised from N(0, 1) activations and a weight of
N(0, 1/K) entries, and the same two operands dequantised to bf16, for the
bf16 peer. The output is bf16.

Peers: ``torch._scaled_mm`` (cuBLASLt's fp8 GEMM) with the case's scales,
where the installed torch and GPU take that layout (block scales need a
recent torch and cuBLAS; a refusal is recorded as not measured), and bf16
cuBLAS, ``torch.matmul`` on the dequantised operands. Ours: the op, stage 1
(``academy:upcast``, tiles dequantised to bf16 before the dot) and the op
without its grouped program order (``academy:ungrouped``). Forward only;
every provider is checked against the float64 product of the dequantised
operands before it is timed.
"""

from __future__ import annotations

from academy.bench.models import projections
from academy.bench.spec import BenchSpec, Case, Sweep

import torch

from examples.fp8_matmul.kernel import (
    A_BLOCKS,
    B_BLOCKS,
    flops,
    fp8_matmul,
    fp8_matmul_upcast,
    quantize_fp8,
)
from examples.fp8_matmul.kernel import reference as fp8_reference

LAYOUTS = ("block", "row", "tensor")
"""The case parameter ``layout`` indexes this tuple (case parameters are ints)."""
SQUARES = (2048, 4096, 8192)
MODEL_TOKENS = 4096
MODEL_PICKS = (
    ("Llama-3.1-8B", "gate_up"),
    ("Llama-3.1-8B", "down"),
    ("Qwen2.5-7B", "qkv"),
    ("GPT-2 XL", "qkv"),
    ("DeepSeek-V3", "kv_a"),
    ("DeepSeek-V3", "expert_gate_up"),
    ("DeepSeek-V3", "expert_down"),
)
"""The matmul chapters' picks, and DeepSeek-V3's expert weights, which its report multiplies in FP8."""


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    """a, a_scale, b, b_scale in the case's layout, then the two operands dequantised to bf16."""
    M, N, K = (case.params[k] for k in ("M", "N", "K"))
    layout = LAYOUTS[case.params["layout"]]
    x = torch.randn((M, K), device=device)
    w = torch.randn((N, K), device=device) * K**-0.5
    a, a_scale = quantize_fp8(x, A_BLOCKS[layout])
    b, b_scale = quantize_fp8(w, B_BLOCKS[layout])
    return (
        a,
        a_scale,
        b,
        b_scale,
        _dequantized(a, a_scale, A_BLOCKS[layout]),
        _dequantized(b, b_scale, B_BLOCKS[layout]),
    )


def _dequantized(codes: torch.Tensor, scales: torch.Tensor, block) -> torch.Tensor:
    """codes · scales in fp32 (exact: a 4-bit significand times a float32 scale), rounded to bf16."""
    bm, bk = (size or dim for size, dim in zip(block, codes.shape))
    full = scales.repeat_interleave(bm, dim=0).repeat_interleave(bk, dim=1)[: codes.shape[0], : codes.shape[1]]
    return (codes.float() * full).to(torch.bfloat16)


def reference(a, a_scale, b, b_scale, a16, b16) -> torch.Tensor:
    return fp8_reference(a, a_scale, b, b_scale, torch.bfloat16)


# --8<-- [start:work]
def work(case: Case) -> float:
    """2·M·N·K FLOPs: a multiply and an add per term, whatever the operands' format."""
    return float(flops(*(case.params[k] for k in ("M", "N", "K"))))


# --8<-- [end:work]


# --8<-- [start:peers]
def ours(op=fp8_matmul, **options):
    def call(a, a_scale, b, b_scale, a16, b16):
        return op(a, a_scale, b, b_scale, torch.bfloat16, **options)

    return call


def cublas_bf16(a, a_scale, b, b_scale, a16, b16):
    """The same product in bf16 on cuBLAS: what an fp8 kernel has to beat to be worth its scales."""
    return a16 @ b16.T


def scaled_mm(a, a_scale, b, b_scale, a16, b16):
    """cuBLASLt's fp8 GEMM through ``torch._scaled_mm``: ``b.T`` is column-major, as it requires.
    Row-wise scales go in as (M, 1) and (1, N); block scales as (M, K/128) and (K/128, N/128), both
    transposed in memory (outer dimension first), the layout PyTorch documents for its blockwise path."""
    if a_scale.numel() == 1 and b_scale.numel() == 1:
        sa, sb = a_scale.reshape(()), b_scale.reshape(())
    elif a_scale.shape[1] == 1 and b_scale.shape[1] == 1:
        sa, sb = a_scale, b_scale.reshape(1, -1)
    else:
        sa, sb = a_scale.T.contiguous().T, b_scale.T
    return torch._scaled_mm(a, b.T, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def _scaled_mm_loader():
    if not hasattr(torch, "_scaled_mm") or not torch.cuda.is_available():
        return None
    return scaled_mm


# --8<-- [end:peers]


def _shape(M: int, N: int, K: int, layout: str) -> dict[str, int]:
    return {"M": M, "N": N, "K": K, "layout": LAYOUTS.index(layout)}


_PROJECTIONS = projections(kinds=MODEL_PICKS)
PEERS = ["academy", "scaled_mm", "cublas_bf16"]

SWEEPS = [
    Sweep(
        f"square {layout}",
        x="N",
        shapes=[_shape(n, n, n, layout) for n in SQUARES],
        providers=[*PEERS, "academy:upcast", "academy:ungrouped"] if layout == "block" else PEERS,
    )
    for layout in LAYOUTS
] + [
    Sweep(
        f"models {layout} M={MODEL_TOKENS}",
        x="N",
        shapes=[_shape(MODEL_TOKENS, p.value.N, p.value.K, layout) for p in _PROJECTIONS],
        labels=[p.label for p in _PROJECTIONS],
        providers=PEERS,
    )
    for layout in ("block", "row")
]

SPEC = BenchSpec(
    slug="fp8_matmul",
    metric="compute",
    sweeps=SWEEPS,
    dtypes=[torch.bfloat16],
    modes=["fwd"],
    make_inputs=make_inputs,
    work=work,
    reference=reference,
    providers={
        "academy": lambda: ours(),
        "scaled_mm": _scaled_mm_loader,
        "cublas_bf16": lambda: cublas_bf16,
        "academy:upcast": lambda: ours(fp8_matmul_upcast),
        "academy:ungrouped": lambda: ours(config={"GROUP_M": 1}),  # what the grouped program order buys
    },
    quick_shapes=1,
    headline=[
        ("fwd", _shape(4096, 4096, 4096, "block"), "bfloat16"),
        ("fwd", _shape(8192, 8192, 8192, "block"), "bfloat16"),
        ("fwd", _shape(8192, 8192, 8192, "row"), "bfloat16"),
        ("fwd", _shape(MODEL_TOKENS, 28672, 4096, "block"), "bfloat16"),
    ],
)
