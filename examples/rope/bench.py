"""Benchmark spec for RoPE: bf16, forward and forward+backward, real models' heads.

* ``models S=4096``: every distinct (H_q, H_kv, D) of the model zoo's models that
  use RoPE (:func:`academy.bench.models.attention_configs`; GPT-2 learns absolute
  positions and is left out), one sequence of 4096 tokens;
* ``decode and prefill``: the configuration most models share (Llama-3.1-8B,
  Mistral-7B, ...) at one token for each of 16 sequences, and one sequence of 16384.

q and k are laid out as transformers makes them: one (B, S, H, D) projection
viewed as (B, H, S, D) (``make_inputs``); cos and sin are real angles, (B, S, D).

Two adapters fit the op to the runner, which times calls that take tensors and
return one tensor:

* RoPE returns a pair. :class:`Pair` shows the runner (q_embed, k_embed) as one
  output: ``detach()`` concatenates them (checks only, never timed) and
  ``backward(grad)`` hands each output its slice of one flat gradient, laid out
  as that output is (as an attention backward would hand it), with no copy.
* The runner makes every floating-point input require grad, and cos and sin are
  constants: they travel as their bits (one int16 tensor, ``cos_sin_bits``) and
  each provider views them back, for free.

Liger's ``LigerRopeFunction`` rotates q and k in place and its backward rotates
the incoming gradient in place. The runner feeds one gradient tensor to each
provider and then to the reference when it checks them, so Liger's backward gets
a private copy of that tensor, made once per tensor, outside the timed calls.
"""

from __future__ import annotations

from academy.bench.models import MODELS, attention_configs, most_shared
from academy.bench.peers import compiled, eager, liger
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch
from torch.utils.weak import WeakTensorKeyDictionary

from examples.rope.kernel import apply_rotary_pos_emb, reference, rope, rope_cos_sin

NO_ROPE = ("GPT-2", "GPT-2 XL")  # learned absolute positions
ZOO = attention_configs([m for m in MODELS if m.name not in NO_ROPE])
ZOO_S = 4096
COMMON = most_shared(ZOO)
ROPE_BASE = 500000.0  # Llama 3's rope_theta; the base changes the angles, not the work


def _shape(config, B: int, S: int) -> dict[str, int]:
    return {"B": B, "S": S, "H_q": config.heads, "H_kv": config.kv_heads, "D": config.head_dim}


SWEEPS = [
    Sweep(
        f"models S={ZOO_S}",
        x="H_q",
        shapes=[_shape(s.value, 1, ZOO_S) for s in ZOO],
        labels=[s.label for s in ZOO],
    ),
    Sweep(
        "decode and prefill",
        x="S",
        shapes=[_shape(COMMON.value, 16, 1), _shape(COMMON.value, 1, 16384)],
        labels=[COMMON.label] * 2,
    ),
]


def cos_sin_bits(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """cos and sin stacked, as integers of their size: inputs the runner will not make require grad."""
    return torch.stack((cos, sin)).view({2: torch.int16, 4: torch.int32}[cos.element_size()])


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    B, S, H_q, H_kv, D = (case.params[key] for key in ("B", "S", "H_q", "H_kv", "D"))
    q = random_tensor((B, S, H_q, D), case.dtype, device=device).transpose(1, 2)
    k = random_tensor((B, S, H_kv, D), case.dtype, device=device).transpose(1, 2)
    cos, sin = rope_cos_sin(torch.arange(S, device=device).expand(B, S), D, ROPE_BASE, case.dtype)
    return q, k, cos_sin_bits(cos, sin)


# --8<-- [start:work]
def bytes_moved(case: Case) -> float:
    """Minimal traffic: the forward reads q, k, cos and sin and writes q_embed and k_embed;
    the backward reads the two output gradients, cos and sin and writes dq and dk.
    With T = B·S tokens: forward (2·(H_q + H_kv) + 2)·T·D values, forward+backward twice that."""
    p = case.params
    tokens = p["B"] * p["S"]
    values = (2 * (p["H_q"] + p["H_kv"]) + 2) * tokens * p["D"]
    element_size = torch.empty((), dtype=case.dtype).element_size()
    return {"fwd": 1, "fwd+bwd": 2}[case.mode] * values * element_size


# --8<-- [end:work]


class Pair:
    """(q_embed, k_embed) as the runner's one output (see the module's docstring)."""

    def __init__(self, q: torch.Tensor, k: torch.Tensor, private_grads=None):
        self.q, self.k, self._private = q, k, private_grads

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.q.numel() + self.k.numel(),)

    def detach(self) -> torch.Tensor:
        return torch.cat((self.q.detach().reshape(-1), self.k.detach().reshape(-1)))

    def backward(self, grad: torch.Tensor) -> None:
        if self._private is not None:
            grad = self._private(grad)
        n = self.q.numel()
        grads = _laid_out_as(grad[:n], self.q), _laid_out_as(grad[n:], self.k)
        torch.autograd.backward((self.q, self.k), grads)


def _laid_out_as(flat: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``flat`` viewed with t's shape, its memory in the order of t's strides (no copy)."""
    order = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    return flat.view([t.shape[d] for d in order]).permute([order.index(d) for d in range(t.dim())])


def pairwise(op, private_grads=None):
    """``op(q, k, cos, sin) -> (q_embed, k_embed)`` as the runner calls it: ``(q, k, bits) -> Pair``."""

    def call(q, k, bits):
        cos, sin = bits.view(q.dtype)
        return Pair(*op(q, k, cos, sin), private_grads)

    return call


def private_copies():
    """grad -> one copy of it per grad tensor, kept while the tensor lives (for an in-place backward)."""
    copies = WeakTensorKeyDictionary()

    def private(grad: torch.Tensor) -> torch.Tensor:
        if grad not in copies:
            copies[grad] = grad.clone()
        return copies[grad]

    return private


def _loaded(loader, **options):
    def load():
        op = loader()
        return None if op is None else pairwise(op, **options)

    return load


SPEC = BenchSpec(
    slug="rope",
    metric="bandwidth",
    sweeps=SWEEPS,
    dtypes=[torch.bfloat16],
    modes=["fwd", "fwd+bwd"],
    make_inputs=make_inputs,
    work=bytes_moved,
    reference=pairwise(reference),
    providers={
        "academy": lambda: pairwise(rope),
        "eager": _loaded(eager(apply_rotary_pos_emb)),
        "compile": _loaded(compiled(apply_rotary_pos_emb)),
        "liger": liger("LigerRopeFunction", lambda apply: pairwise(apply, private_copies())),
    },
    headline=[
        ("fwd", _shape(COMMON.value, 1, ZOO_S), "bfloat16"),
        ("fwd+bwd", _shape(COMMON.value, 1, ZOO_S), "bfloat16"),
    ],
)
