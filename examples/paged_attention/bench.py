"""Benchmark spec for paged decode attention: one new token per sequence, bf16, forward only.

A case is a batch of sequences whose lengths run from ``S_min`` to ``S_max``, evenly spaced (on a log
scale when they span more than 64×: a few long sequences among many short ones), shuffled in a fixed
order, in a cache of ``page``-token blocks scattered at random. The heads come from the model zoo
(``academy.bench.models``):

* ``batches``: the zoo's most shared configuration (32 query heads, 8 KV heads, D = 128: Llama-3.1-8B
  and four others), blocks of 16: 64 short sequences (128 to 512 keys), 32 of 1k to 8k, 16 from 1 to
  128k, 8 of 32k. Every stage, and ``academy:unsplit`` (the final kernel held to one split), here.
* ``block 64``: the same heads with blocks of 64 tokens, 32 of 1k to 8k and 8 of 32k.
* ``models B=32``: three other zoo configurations at 32 sequences of 1k to 8k, blocks of 16:
  Qwen2.5-7B (28 / 4 / 128), Llama-3.2-1B (32 / 8 / 64) and Llama-2-7B (32 / 32 / 128, no grouping).

The peers, all PyTorch, the way one would write the op without a paged kernel: gather each sequence's
pages into one padded (B, H_kv, max_blocks·page, D) tensor per cache, then
``scaled_dot_product_attention`` with a key mask from ``seq_lens`` (the query heads of a group as the
query rows of their KV head, so no head is repeated): ``sdpa`` times the gather and the attention,
``sdpa_pregathered`` the attention alone on K/V gathered beforehand (the case's last two inputs, which
the other providers ignore), and ``compile`` is ``torch.compile`` of the gather and the attention.

The work is the bytes the op must move (:func:`~examples.paged_attention.kernel.decode_bytes`): every
cached K and V element once, q and the output. Decode reads each cached value for two FLOPs, so the
copy ceiling bounds it.
"""

from __future__ import annotations

import math

from academy.bench import peers
from academy.bench.models import attention_configs, most_shared, sweep
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.testing import random_tensor

import torch

from examples.paged_attention.cache import random_paged_cache
from examples.paged_attention.kernel import HEAD_DIMS, decode_bytes, paged_decode_attention, reference
from examples.paged_attention.stages import STAGES

ZOO = ("Qwen2.5-7B", "Llama-3.2-1B", "Llama-2-7B")
"""The zoo configurations timed besides the most shared one: fewer KV heads, a head size of 64, no grouping."""
GEOMETRIC_SPAN = 64


# --8<-- [start:work]
def seq_lengths(params) -> list[int]:
    """The case's lengths: B values from S_min to S_max, evenly spaced (geometrically past a 64× span),
    in a fixed shuffled order."""
    B, lo, hi = params["B"], params["S_min"], params["S_max"]
    if B == 1 or lo == hi:
        lengths = [hi] * B
    elif hi > GEOMETRIC_SPAN * lo:
        lengths = [round(lo * (hi / lo) ** (i / (B - 1))) for i in range(B)]
    else:
        lengths = [round(lo + (hi - lo) * i / (B - 1)) for i in range(B)]
    order = torch.randperm(B, generator=torch.Generator().manual_seed(B))
    return [lengths[i] for i in order.tolist()]


def work(case: Case) -> float:
    """Σ_b seq_len_b · H_kv · D · 2 (K and V) elements read, plus q read and the output written."""
    p = case.params
    return decode_bytes(seq_lengths(p), p["H"], p["KV"], p["D"], case.dtype.itemsize)


# --8<-- [end:work]


def make_inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    """q, the caches, the block table, the lengths, then the K and V the ``sdpa_pregathered`` peer reads."""
    p = case.params
    lengths = seq_lengths(p) if device == "cuda" else seq_lengths(p)[:2]  # the CPU spec test: two sequences
    k_cache, v_cache, table, seq_lens = random_paged_cache(
        lengths, p["KV"], p["D"], p["page"], case.dtype, device=device
    )
    q = random_tensor((len(lengths), p["H"], p["D"]), case.dtype, device=device)
    return q, k_cache, v_cache, table, seq_lens, gathered(k_cache, table), gathered(v_cache, table)


def bench_reference(q, k_cache, v_cache, block_table, seq_lens, *pregathered) -> torch.Tensor:
    return reference(q, k_cache, v_cache, block_table, seq_lens)


# --8<-- [start:peers]
def gathered(cache: torch.Tensor, block_table: torch.Tensor) -> torch.Tensor:
    """(B, H_kv, max_blocks·page, D): each sequence's pages in order, padded to the table's width."""
    return cache[block_table.long()].flatten(1, 2).transpose(1, 2)


def sdpa_padded(q, k, v, seq_lens) -> torch.Tensor:
    """SDPA over padded K/V with the keys past each length masked; a group's query heads are its rows."""
    B, H, D = q.shape
    H_kv = k.shape[1]
    keep = torch.arange(k.shape[2], device=q.device) < seq_lens[:, None]
    out = torch.nn.functional.scaled_dot_product_attention(
        q.view(B, H_kv, H // H_kv, D), k, v, attn_mask=keep[:, None, None, :], scale=1 / math.sqrt(D)
    )
    return out.reshape(B, H, D)


def gather_then_sdpa(q, k_cache, v_cache, block_table, seq_lens, *pregathered) -> torch.Tensor:
    return sdpa_padded(q, gathered(k_cache, block_table), gathered(v_cache, block_table), seq_lens)


def sdpa_on_pregathered(q, k_cache, v_cache, block_table, seq_lens, k_padded, v_padded) -> torch.Tensor:
    return sdpa_padded(q, k_padded, v_padded, seq_lens)


# --8<-- [end:peers]


def ours(op):
    return lambda: (
        lambda q, k_cache, v_cache, block_table, seq_lens, *pregathered: op(q, k_cache, v_cache, block_table, seq_lens)
    )


def on_gpu(op):
    return lambda: op if torch.cuda.is_available() else None


STAGE_PROVIDERS = [f"academy:{name}" for name in STAGES]
PEERS = ["sdpa", "sdpa_pregathered"]

CONFIGS = attention_configs(head_dims=HEAD_DIMS)
MAIN = most_shared(CONFIGS)
PICKED = [s for s in CONFIGS if any(name in s.models for name in ZOO)]


def _shape(c, B: int, s_min: int, s_max: int, page: int = 16) -> dict[str, int]:
    """A case's parameters for the attention configuration ``c`` (heads, kv heads, head dim)."""
    return {"B": B, "S_min": s_min, "S_max": s_max, "H": c.heads, "KV": c.kv_heads, "D": c.head_dim, "page": page}


BATCHES = [(64, 128, 512), (32, 1024, 8192), (16, 1, 131072), (8, 32768, 32768), (1, 32768, 32768)]

SWEEPS = [
    Sweep(
        "batches",
        x="B",
        shapes=[_shape(MAIN.value, *batch) for batch in BATCHES],
        labels=[MAIN.label] * len(BATCHES),
        providers=["academy", *PEERS, "compile", *STAGE_PROVIDERS, "academy:unsplit"],
    ),
    Sweep(
        "block 64",
        x="B",
        shapes=[_shape(MAIN.value, 32, 1024, 8192, 64), _shape(MAIN.value, 8, 32768, 32768, 64)],
        labels=[MAIN.label] * 2,
        providers=["academy", *PEERS, *STAGE_PROVIDERS],
    ),
    sweep(
        "models B=32",
        "KV",
        PICKED,
        lambda config: _shape(config, 32, 1024, 8192),
        providers=["academy", *PEERS, *STAGE_PROVIDERS],
    ),
]

SPEC = BenchSpec(
    slug="paged_attention",
    metric="bandwidth",
    sweeps=SWEEPS,
    dtypes=[torch.bfloat16],
    modes=["fwd"],
    make_inputs=make_inputs,
    work=work,
    reference=bench_reference,
    providers={
        "academy": ours(paged_decode_attention),
        "sdpa": on_gpu(gather_then_sdpa),
        "sdpa_pregathered": on_gpu(sdpa_on_pregathered),
        "compile": peers.compiled(gather_then_sdpa),
        **{f"academy:{name}": ours(op) for name, op in STAGES.items()},
        "academy:unsplit": ours(lambda *inputs: paged_decode_attention(*inputs, num_splits=1)),
    },
    headline=[
        ("fwd", _shape(MAIN.value, 32, 1024, 8192), "bfloat16"),
        ("fwd", _shape(MAIN.value, 8, 32768, 32768), "bfloat16"),
        ("fwd", _shape(MAIN.value, 16, 1, 131072), "bfloat16"),
    ],
)
