"""Benchmark spec for cross entropy: a bandwidth sweep over vocabularies and a
compute sweep for the fused linear cross entropy.

Every provider takes the inputs of either sweep: ``(logits, target)`` for
"T=8192" and ``(hidden, weight, target)`` for "linear".
"""

from academy.bench.models import vocabularies
from academy.bench.peers import compiled, eager, liger
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch
import torch.nn.functional as F

from examples.cross_entropy.fused_linear import fused_linear_cross_entropy, unfused_linear_cross_entropy
from examples.cross_entropy.fused_linear import reference as linear_reference
from examples.cross_entropy.kernel import cross_entropy, cross_entropy_grad_in_backward
from examples.cross_entropy.kernel import reference as ce_reference

IGNORED_EVERY = 64
"""One token in 64 carries ignore_index (padding), so every provider takes that path too."""


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    p = case.params
    target = torch.randint(0, p["V"], (p["T"],), device=device)
    target[::IGNORED_EVERY] = -100
    if "H" in p:
        hidden = random_tensor((p["T"], p["H"]), case.dtype, device=device)
        weight = random_tensor((p["V"], p["H"]), case.dtype, device=device, scale=p["H"] ** -0.5)
        return hidden, weight, target
    return random_tensor((p["T"], p["V"]), case.dtype, device=device, scale=2.0), target


# --8<-- [start:work]
def work(case: Case) -> float:
    """Bandwidth sweep: the logits are read once (fwd), and the gradient is written
    once more (fwd+bwd): 1 or 2 passes over T·V elements. Compute sweep: the
    logits GEMM is 2·T·H·V FLOPs; the backward adds d hidden and d weight, 6·T·H·V in all."""
    p = case.params
    if case.metric == "compute":
        return {"fwd": 2, "fwd+bwd": 6}[case.mode] * p["T"] * p["H"] * p["V"]
    element_size = torch.empty((), dtype=case.dtype).element_size()
    passes = {"fwd": 1, "fwd+bwd": 2}[case.mode]
    return passes * p["T"] * p["V"] * element_size


# --8<-- [end:work]


def reference(*inputs: torch.Tensor) -> torch.Tensor:
    return linear_reference(*inputs) if len(inputs) == 3 else ce_reference(*inputs)


def academy_op(*inputs: torch.Tensor) -> torch.Tensor:
    return fused_linear_cross_entropy(*inputs) if len(inputs) == 3 else cross_entropy(*inputs)


def academy_unfused(*inputs: torch.Tensor) -> torch.Tensor:
    """Linear sweep: full logits, then our cross_entropy. Vocabulary sweep: the loss and
    its gradient in separate passes (the gradient recomputed in backward)."""
    return unfused_linear_cross_entropy(*inputs) if len(inputs) == 3 else cross_entropy_grad_in_backward(*inputs)


def torch_fp32(*inputs: torch.Tensor) -> torch.Tensor:
    """``eager-fp32``: the logits upcast to fp32 first (a common, slower, more memory-hungry habit)."""
    logits = inputs[0] @ inputs[1].T if len(inputs) == 3 else inputs[0]
    return F.cross_entropy(logits.float(), inputs[-1]).to(logits.dtype)


def torch_native_dtype(*inputs: torch.Tensor) -> torch.Tensor:
    """``eager``: what a user writes, ``F.cross_entropy(hidden @ weight.T, target)`` in the model's dtype."""
    logits = inputs[0] @ inputs[1].T if len(inputs) == 3 else inputs[0]
    return F.cross_entropy(logits, inputs[-1])


COMPILE_V = 128256
"""torch.compile is timed at the Llama-3 vocabulary only: its compile time was most of the bench's device time."""


def _compiled_at_llama_vocabulary():
    op = compiled(torch_native_dtype)()
    if op is None:
        return None

    def call(*inputs):
        if inputs[0].shape[-1] != COMPILE_V:
            raise NotImplementedError(f"timed at V = {COMPILE_V} only, to keep compile time off the device budget")
        return op(*inputs)

    return call


def _liger_adapter(_unused):
    """Liger's cross entropy for the vocabulary sweep, its fused linear one for the linear sweep
    (both return tuples: keep the loss)."""
    from liger_kernel.ops import LigerCrossEntropyFunction, LigerFusedLinearCrossEntropyFunction

    def op(*inputs):
        if len(inputs) == 3:
            return LigerFusedLinearCrossEntropyFunction.apply(inputs[0], inputs[1], inputs[2])[0]
        return LigerCrossEntropyFunction.apply(inputs[0], inputs[1], None)[0]

    return op


LARGE_VOCAB = 128_000
"""From this vocabulary up, the model-zoo sweep takes 4096 tokens instead of 8192 (the logits of
8192 tokens would be 2 GiB and more, and the bench's device time grows with them)."""


def _model_sweep(tokens: int, large: bool) -> Sweep:
    """The zoo's distinct vocabularies (academy.bench.models) on one side of LARGE_VOCAB, labelled
    with their models; ``academy bench cross_entropy --sweep models`` measures both sweeps alone."""
    vocabs = [v for v in vocabularies() if (v.value >= LARGE_VOCAB) == large]
    return Sweep(
        f"models T={tokens}",
        x="V",
        shapes=[{"T": tokens, "V": v.value} for v in vocabs],
        labels=[v.label for v in vocabs],
        providers=("academy", "eager", "eager-fp32", "compile", "liger"),
    )


SPEC = BenchSpec(
    slug="cross_entropy",
    metric="bandwidth",
    sweeps=[
        Sweep("T=8192", x="V", shapes=[{"T": 8192, "V": v} for v in (128256, 32000)]),
        Sweep(
            "linear",
            x="V",
            shapes=[{"T": 8192, "H": 4096, "V": 128256}],
            metric="compute",
            providers=("academy", "academy:unfused", "eager", "eager-fp32", "liger"),
        ),
        _model_sweep(8192, large=False),
        _model_sweep(4096, large=True),
    ],
    dtypes=[torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=work,
    reference=reference,
    providers={
        "academy": lambda: academy_op,
        "academy:unfused": lambda: academy_unfused,
        "eager": eager(torch_native_dtype),
        "eager-fp32": eager(torch_fp32),
        "compile": _compiled_at_llama_vocabulary,
        # Liger compares grad_output with 1 on the host (and asserts on the targets): the
        # runner times it from the host with CUDA events, not in a CUDA graph.
        "liger": liger("LigerCrossEntropyFunction", adapt=_liger_adapter, graph_safe=False),
    },
    quick_shapes=1,  # --quick: the Llama-3 vocabulary of each sweep
    headline=[
        ("fwd+bwd", {"T": 8192, "V": 128256}, "bfloat16"),
        ("fwd", {"T": 8192, "V": 128256}, "bfloat16"),
        ("fwd+bwd", {"T": 8192, "H": 4096, "V": 128256}, "bfloat16"),
    ],
)
