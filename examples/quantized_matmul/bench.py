"""Benchmark spec for the low-bit weight matmul: decode (bandwidth) and prefill (compute) shapes.

Weights (N, K) of a Llama-like layer: 8192 × 8192 and 14336 × 4096 (K = 4096),
int4 and int8 codes with one fp16 scale and zero point per 128 inputs.

* ``int<b> decode K=…``: M ∈ {1, 16} tokens. The metric is GB/s on the
  bytes a quantised call must move (packed codes, scales, zeros, x and the
  output) against the copy ceiling. cuBLAS reads 4× (int4) or 2× (int8) more
  bytes for the same rows, so its "GB/s" here is the speed it delivers on
  the quantised problem, not the bandwidth it draws.
* ``int<b> prefill K=…``: M ∈ {128, 1024, 4096}: TFLOP/s (2·M·N·K) against the
  matmul ceiling.
* ``models int4 M=…``: projections of real models (``academy.bench.models``,
  labelled with the models that have them; those whose K is a whole number of
  groups) at M ∈ {1, 16} (GB/s) and {128, 3000} (TFLOP/s), int4 only.

Providers: ours (the dispatch), cuBLAS on the same weight dequantised to
fp16 (``x @ W.T``: what the quantised model replaces), GemLite's A16W4/A16W8
layer at its default settings (when installed), our paths forced
(``academy:gemv`` and ``academy:dot`` on decode shapes, and
``academy:dot_unsplit``, the tensor-core path without split-K; ``academy:dot`` and
``academy:slab`` on prefill shapes) and, on prefill shapes, the wholly
materialising alternative ``academy:dequant_cublas`` (dequantise the whole
weight to fp16, then cuBLAS). Forward only; every provider is checked
against ``x @ dequantize(W).T`` in fp32 before it is timed.
"""

from __future__ import annotations

import weakref

from academy.bench.models import DECODE_TOKENS, PROJECTION_PICKS, RAGGED_TOKENS, projections
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.quantized_matmul.exercises import dequantize_to
from examples.quantized_matmul.kernel import (
    QuantizedWeight,
    decode_bytes,
    dequantize,
    quantize,
    quantized_matmul,
    unpack,
)

WEIGHTS = ((8192, 8192), (4096, 14336))  # (K, N)
GROUP = 128
DECODE_M = (1, 16)
PREFILL_M = (128, 1024, 4096)


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    """x, the packed weight's three tensors, and the same weight dequantised to x's dtype (for cuBLAS)."""
    M, N, K, bits = (case.params[k] for k in ("M", "N", "K", "bits"))
    w = random_tensor((N, K), torch.float32, device=device, scale=K**-0.5)
    packed = quantize(w.to(case.dtype), bits, case.params["group"])
    dense = dequantize(packed).to(case.dtype)
    return random_tensor((M, K), case.dtype, device=device), packed.data, packed.scales, packed.zeros, dense


def as_packed(data, scales, zeros, dense) -> QuantizedWeight:
    """The bench's tensors back in a QuantizedWeight (bits and group size follow from the shapes)."""
    N, K = dense.shape
    return QuantizedWeight(
        data, scales, zeros, bits=32 * data.shape[0] // K, group_size=K // scales.shape[0], shape=(N, K)
    )


def reference(x, data, scales, zeros, dense) -> torch.Tensor:
    return (x.float() @ dequantize(as_packed(data, scales, zeros, dense)).T).to(x.dtype)


# --8<-- [start:work]
def work(case: Case) -> float:
    """Bandwidth sweeps: the bytes of the packed codes, the scales and zeros, x and the output.
    Compute sweeps: 2·M·N·K FLOPs."""
    M, N, K, bits, group = (case.params[k] for k in ("M", "N", "K", "bits", "group"))
    if case.metric == "compute":
        return 2.0 * M * N * K
    return float(decode_bytes(M, N, K, bits, group))


# --8<-- [end:work]


def ours(path: str = "auto", config: dict | None = None):
    def op(x, data, scales, zeros, dense):
        return quantized_matmul(x, as_packed(data, scales, zeros, dense), path=path, config=config)

    return op


def cublas(x, data, scales, zeros, dense):
    return x @ dense.T


def dequantize_then_cublas(x, data, scales, zeros, dense):
    """The materialising alternative: write the fp16 weight once (exercise 3), then one cuBLAS call."""
    return x @ dequantize_to(as_packed(data, scales, zeros, dense), x.dtype).T


def gemlite_peer():
    """GemLite's ``GemLiteLinear`` (A16W4 / A16W8, default settings), packed once per weight copy;
    ``None`` where gemlite or a GPU is missing."""
    try:
        from gemlite import DType, GemLiteLinear
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    layers: dict[int, tuple[weakref.ref, torch.nn.Module]] = {}

    def op(x, data, scales, zeros, dense):
        hit = layers.get(data.data_ptr())
        if hit is None or hit[0]() is not data:  # a freed tensor's address may be reused
            packed = as_packed(data, scales, zeros, dense)
            (N, K), dtype = packed.shape, {torch.float16: DType.FP16, torch.bfloat16: DType.BF16}[x.dtype]
            layer = GemLiteLinear(
                packed.bits,
                group_size=packed.group_size,
                in_features=K,
                out_features=N,
                input_dtype=dtype,
                output_dtype=dtype,
            )
            codes = unpack(data, packed.bits).to(torch.uint8).contiguous()  # (N, K), GemLite packs them its own way
            layer.pack(codes, scales.T.contiguous(), zeros.T.contiguous(), None)  # w = (q − z)·s, as ours
            hit = layers[data.data_ptr()] = (weakref.ref(data), layer)
        return hit[1](x)

    return op


MODEL_TOKENS = (*DECODE_TOKENS, 128, RAGGED_TOKENS)
"""Tokens of the model-zoo sweeps: decode (1, 16: bandwidth-bound), prefill (128, and 3000,
a multiple of no tile: compute-bound)."""
MODEL_BITS = 4
_PROJECTIONS = [p for p in projections(kinds=PROJECTION_PICKS) if p.value.K % GROUP == 0]
"""The zoo's picked weights (academy.bench.models) whose K holds whole groups of GROUP inputs."""


def _model_sweep(m: int) -> Sweep:
    """The picked projections of the zoo as int4 weights at M tokens, ours against cuBLAS on the
    dequantised weight and GemLite."""
    return Sweep(
        f"models int{MODEL_BITS} M={m}",
        x="N",
        shapes=[{"M": m, "N": p.value.N, "K": p.value.K, "bits": MODEL_BITS, "group": GROUP} for p in _PROJECTIONS],
        labels=[p.label for p in _PROJECTIONS],
        metric="bandwidth" if m in DECODE_TOKENS else "compute",
        providers=["academy", "cublas", "gemlite"],
    )


def _sweeps() -> list[Sweep]:
    sweeps = []
    for bits in (4, 8):
        for K, N in WEIGHTS:
            for kind, ms, metric, variants in (
                ("decode", DECODE_M, "bandwidth", ["academy:gemv", "academy:dot", "academy:dot_unsplit"]),
                ("prefill", PREFILL_M, "compute", ["academy:dot", "academy:slab", "academy:dequant_cublas"]),
            ):
                sweeps.append(
                    Sweep(
                        f"int{bits} {kind} K={K}",
                        x="M",
                        shapes=[{"M": m, "N": N, "K": K, "bits": bits, "group": GROUP} for m in ms],
                        metric=metric,
                        providers=["academy", "cublas", "gemlite", *variants],
                    )
                )
    return sweeps + [_model_sweep(m) for m in MODEL_TOKENS]


SPEC = BenchSpec(
    slug="quantized_matmul",
    metric="bandwidth",
    sweeps=_sweeps(),
    dtypes=[torch.float16],
    modes=["fwd"],
    make_inputs=make_inputs,
    work=work,
    reference=reference,
    providers={
        "academy": lambda: ours(),
        "cublas": lambda: cublas,
        "gemlite": gemlite_peer,
        "academy:gemv": lambda: ours("gemv"),
        "academy:dot": lambda: ours("dot"),
        "academy:dot_unsplit": lambda: ours("dot", {"SPLIT_K": 1}),
        "academy:slab": lambda: ours("slab"),
        "academy:dequant_cublas": lambda: dequantize_then_cublas,
    },
    headline=[
        ("fwd", {"M": 1, "N": 8192, "K": 8192, "bits": 4, "group": GROUP}, "float16"),
        ("fwd", {"M": 16, "N": 14336, "K": 4096, "bits": 4, "group": GROUP}, "float16"),
        ("fwd", {"M": 1, "N": 8192, "K": 8192, "bits": 8, "group": GROUP}, "float16"),
        ("fwd", {"M": 4096, "N": 8192, "K": 8192, "bits": 4, "group": GROUP}, "float16"),
    ],
)
