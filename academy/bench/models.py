"""The model zoo: real model configurations, and the distinct shapes they give each chapter.

One table, `MODELS`, of published configurations. Every value is read
from the model's ``config.json`` on the Hugging Face Hub (``Model.repo``,
``Model.file``); the field docs below name the config key each value comes
from, and a model whose config spells a value differently says so in
``derived``. The chapters' ``models`` benchmark sweeps are generated from this
table by the functions at the bottom, never typed: each returns the *distinct*
values (deduplicated across models), each with the names of the models that
share it, so that one measured shape stands for every model that has it.

Token counts (rows of a norm, tokens of a projection, sequence lengths) are
not model properties; the ones that matter are the constants below: decode
(one or a few tokens per step) and prefill or training (thousands).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

DECODE_TOKENS = (1, 16)
"""Tokens per forward pass while decoding: one sequence, or a batch of 16."""
PREFILL_TOKENS = (2048, 4096, 8192, 16384)
"""Tokens per forward pass in prefill or training: one sequence of 2k to 16k, or a micro-batch of them."""
SEQUENCE_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
"""Attention sequence lengths, 1k to 32k."""
RAGGED_TOKENS = 3000
"""A token count or sequence length that no tile divides (3000 = 16 × 187.5): the masked-edge case."""


@dataclass(frozen=True)
class MLA:
    """DeepSeek's multi-head latent attention: queries and keys/values through low-rank projections."""

    q_lora_rank: int  # q_lora_rank
    kv_lora_rank: int  # kv_lora_rank
    qk_nope_head_dim: int  # qk_nope_head_dim
    qk_rope_head_dim: int  # qk_rope_head_dim
    v_head_dim: int  # v_head_dim


@dataclass(frozen=True)
class Model:
    """One published configuration (the Hugging Face config keys in brackets)."""

    name: str
    repo: str
    """The Hugging Face repository id whose ``file`` every value below comes from."""
    hidden: int
    """[hidden_size] the residual stream width: what the norms normalise."""
    intermediate: int | None
    """[intermediate_size] the dense MLP's width (each half of a gated MLP); ``None`` when every MLP is MoE."""
    heads: int
    """[num_attention_heads] query heads."""
    kv_heads: int
    """[num_key_value_heads] key/value heads (fewer than ``heads``: grouped-query attention)."""
    head_dim: int
    """[head_dim] where the config lists it (``head_dim_listed``), else hidden_size / num_attention_heads."""
    vocab: int
    """[vocab_size] rows of the LM head: the cross entropy's classes."""
    mlp: str
    """"swiglu" or "geglu" (gated: [hidden_act] silu / gelu_pytorch_tanh) or "gelu" (ungated, GPT-2)."""
    norm: str
    """"rmsnorm" or "layernorm"."""
    head_dim_listed: bool = False
    """The config lists ``head_dim`` (then heads × head_dim need not equal hidden)."""
    expert_intermediate: int | None = None
    """[moe_intermediate_size] one expert's MLP width, for mixture-of-experts models."""
    experts: int | None = None
    """[num_local_experts / n_routed_experts] routed experts per MoE layer."""
    experts_per_token: int | None = None
    """[num_experts_per_tok] experts each token is routed to."""
    mla: MLA | None = None
    """Multi-head latent attention's dimensions (DeepSeek); ``head_dim`` is then the query/key head size."""
    attn_logit_softcap: float | None = None
    """[attn_logit_softcapping] scores become cap·tanh(scores / cap) before the softmax (Gemma-2)."""
    final_logit_softcap: float | None = None
    """[final_logit_softcapping] the same on the LM head's logits before the cross entropy (Gemma-2)."""
    derived: tuple[tuple[str, str], ...] = ()
    """(field, how) for every value this config spells differently from the keys above."""
    file: str = "config.json"

    @property
    def source(self) -> str:
        return f"https://huggingface.co/{self.repo}/blob/main/{self.file}"

    @property
    def gated(self) -> bool:
        return self.mlp in ("swiglu", "geglu")

    @property
    def mlp_widths(self) -> tuple[int, ...]:
        """Every MLP width the model runs: the dense one, then one expert's."""
        return tuple(w for w in (self.intermediate, self.expert_intermediate) if w is not None)


_GPT2_KEYS = (
    ("hidden", "n_embd"),
    ("intermediate", "n_inner is null: 4 × n_embd"),
    ("heads", "n_head"),
    ("kv_heads", "n_head (multi-head attention)"),
    ("head_dim", "n_embd / n_head"),
    ("mlp", "activation_function gelu_new, ungated"),
    ("norm", "LayerNorm (layer_norm_epsilon)"),
)

MODELS: tuple[Model, ...] = (
    Model("GPT-2", "openai-community/gpt2", 768, 3072, 12, 12, 64, 50257, "gelu", "layernorm", derived=_GPT2_KEYS),
    Model(
        "GPT-2 XL", "openai-community/gpt2-xl", 1600, 6400, 25, 25, 64, 50257, "gelu", "layernorm", derived=_GPT2_KEYS
    ),
    Model("Llama-2-7B", "meta-llama/Llama-2-7b-hf", 4096, 11008, 32, 32, 128, 32000, "swiglu", "rmsnorm"),
    Model("Llama-3.1-8B", "meta-llama/Llama-3.1-8B", 4096, 14336, 32, 8, 128, 128256, "swiglu", "rmsnorm"),
    Model("Llama-3.1-70B", "meta-llama/Llama-3.1-70B", 8192, 28672, 64, 8, 128, 128256, "swiglu", "rmsnorm"),
    Model(
        "Llama-3.2-1B",
        "meta-llama/Llama-3.2-1B",
        2048,
        8192,
        32,
        8,
        64,
        128256,
        "swiglu",
        "rmsnorm",
        head_dim_listed=True,
    ),
    Model("Mistral-7B", "mistralai/Mistral-7B-v0.1", 4096, 14336, 32, 8, 128, 32000, "swiglu", "rmsnorm"),
    Model(
        "Mixtral-8x7B",
        "mistralai/Mixtral-8x7B-v0.1",
        4096,
        None,
        32,
        8,
        128,
        32000,
        "swiglu",
        "rmsnorm",
        expert_intermediate=14336,
        experts=8,
        experts_per_token=2,
        derived=(
            ("intermediate", "none: every MLP is a mixture of 8 experts"),
            ("expert_intermediate", "intermediate_size (each expert's width)"),
            ("experts", "num_local_experts"),
        ),
    ),
    Model(
        "Mistral-Nemo-12B",
        "mistralai/Mistral-Nemo-Base-2407",
        5120,
        14336,
        32,
        8,
        128,
        131072,
        "swiglu",
        "rmsnorm",
        head_dim_listed=True,
    ),
    Model("Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B", 896, 4864, 14, 2, 64, 151936, "swiglu", "rmsnorm"),
    Model("Qwen2.5-7B", "Qwen/Qwen2.5-7B", 3584, 18944, 28, 4, 128, 152064, "swiglu", "rmsnorm"),
    Model("Qwen2.5-72B", "Qwen/Qwen2.5-72B", 8192, 29568, 64, 8, 128, 152064, "swiglu", "rmsnorm"),
    Model("Qwen3-8B", "Qwen/Qwen3-8B", 4096, 12288, 32, 8, 128, 151936, "swiglu", "rmsnorm", head_dim_listed=True),
    Model(
        "Gemma-2-2B",
        "google/gemma-2-2b",
        2304,
        9216,
        8,
        4,
        256,
        256000,
        "geglu",
        "rmsnorm",
        head_dim_listed=True,
        attn_logit_softcap=50.0,
        final_logit_softcap=30.0,
        derived=(("mlp", "hidden_activation gelu_pytorch_tanh, gated"),),
    ),
    Model(
        "Gemma-2-9B",
        "google/gemma-2-9b",
        3584,
        14336,
        16,
        8,
        256,
        256000,
        "geglu",
        "rmsnorm",
        head_dim_listed=True,
        attn_logit_softcap=50.0,
        final_logit_softcap=30.0,
        derived=(("mlp", "hidden_activation gelu_pytorch_tanh, gated"),),
    ),
    Model(
        "Phi-3-mini",
        "microsoft/Phi-3-mini-4k-instruct",
        3072,
        8192,
        32,
        32,
        96,
        32064,
        "swiglu",
        "rmsnorm",
        derived=(("mlp", "hidden_act silu on the fused gate_up_proj"),),
    ),
    Model("Phi-4", "microsoft/phi-4", 5120, 17920, 40, 10, 128, 100352, "swiglu", "rmsnorm"),
    Model(
        "DeepSeek-V3",
        "deepseek-ai/DeepSeek-V3",
        7168,
        18432,
        128,
        128,
        192,
        129280,
        "swiglu",
        "rmsnorm",
        head_dim_listed=True,
        expert_intermediate=2048,
        experts=256,
        experts_per_token=8,
        mla=MLA(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
        derived=(
            ("intermediate", "intermediate_size: the first_k_dense_replace = 3 dense layers"),
            ("experts", "n_routed_experts (plus n_shared_experts = 1 of the same width)"),
            ("head_dim", "qk_nope_head_dim + qk_rope_head_dim (multi-head latent attention)"),
        ),
    ),
)


def model(name: str) -> Model:
    for found in MODELS:
        if found.name == name:
            return found
    raise KeyError(f"no model {name!r}; the table has: {', '.join(m.name for m in MODELS)}")


# --------------------------------------------------------------------------- distinct shapes

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Shared:
    """One distinct value (a width, a shape, a config) and the models that have it."""

    value: Hashable
    models: tuple[str, ...]

    @property
    def label(self) -> str:
        return ", ".join(self.models)


def distinct(pairs: Iterable[tuple[K, str]], key: Callable[[K], object] | None = None) -> list[Shared]:
    """(value, model name) pairs → one `Shared` per distinct value, sorted by ``key``
    (the value itself by default), each naming its models once, in table order."""
    shared: dict[K, list[str]] = {}
    for value, name in pairs:
        names = shared.setdefault(value, [])
        if name not in names:
            names.append(name)
    ordered = sorted(shared, key=key) if key else sorted(shared)
    return [Shared(value, tuple(shared[value])) for value in ordered]


def sweep(name: str, x: str, shared: Sequence[Shared], shape: Callable[[Any], Mapping[str, int]], **fields):
    """A benchmark [`Sweep`][academy.bench.spec.Sweep] with one shape per distinct value,
    ``shape(value)``, labelled with the value's models; ``fields`` are the sweep's others."""
    from academy.bench.spec import Sweep

    return Sweep(name, x=x, shapes=[dict(shape(s.value)) for s in shared], labels=[s.label for s in shared], **fields)


def hidden_sizes(models: Sequence[Model] = MODELS, norm: str | None = None) -> list[Shared]:
    """The residual widths the norms see (``norm``: only models with that norm)."""
    return distinct((m.hidden, m.name) for m in models if norm is None or m.norm == norm)


def glu_widths(models: Sequence[Model] = MODELS) -> list[Shared]:
    """The widths of every gated MLP, dense and expert (what a GLU kernel sees per token)."""
    return distinct((w, m.name) for m in models if m.gated for w in m.mlp_widths)


def head_counts(models: Sequence[Model] = MODELS) -> list[Shared]:
    """The query-head counts: one attention score row per head per query, for a row softmax."""
    return distinct((m.heads, m.name) for m in models)


def vocabularies(models: Sequence[Model] = MODELS) -> list[Shared]:
    """The LM heads' class counts: the cross entropy's (and the vocabulary softmax's) row widths."""
    return distinct((m.vocab, m.name) for m in models)


@dataclass(frozen=True, order=True)
class Projection:
    """A linear layer's weight, ``nn.Linear`` style: N outputs × K inputs (y = x·Wᵀ, x of M × K)."""

    N: int
    K: int


PROJECTION_KINDS = ("qkv", "o", "q_a", "q_b", "kv_a", "kv_b", "gate_up", "up", "down", "expert_gate_up", "expert_down")


def model_projections(m: Model) -> dict[str, Projection]:
    """The weights a layer multiplies by (kinds from `PROJECTION_KINDS`), with Q, K and V fused
    into one weight and gate and up fused into one, as inference engines and Phi-3 store them.
    DeepSeek's latent attention has five projections instead of QKV. A model whose every MLP is MoE
    (Mixtral) lists one expert's as its MLP; one with both (DeepSeek) adds ``expert_*``."""
    width = m.intermediate or m.expert_intermediate
    if m.mla is None:
        out = {
            "qkv": Projection((m.heads + 2 * m.kv_heads) * m.head_dim, m.hidden),
            "o": Projection(m.hidden, m.heads * m.head_dim),
        }
    else:
        a = m.mla
        out = {
            "q_a": Projection(a.q_lora_rank, m.hidden),
            "q_b": Projection(m.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim), a.q_lora_rank),
            "kv_a": Projection(a.kv_lora_rank + a.qk_rope_head_dim, m.hidden),
            "kv_b": Projection(m.heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank),
            "o": Projection(m.hidden, m.heads * a.v_head_dim),
        }
    out["gate_up" if m.gated else "up"] = Projection((2 if m.gated else 1) * width, m.hidden)
    out["down"] = Projection(m.hidden, width)
    if m.intermediate is not None and m.expert_intermediate is not None:
        out["expert_gate_up"] = Projection(2 * m.expert_intermediate, m.hidden)
        out["expert_down"] = Projection(m.hidden, m.expert_intermediate)
    return out


def projections(models: Sequence[Model] = MODELS, kinds: Sequence[tuple[str, str]] | None = None) -> list[Shared]:
    """Distinct projection shapes (`Projection`), labelled "model kind"; ``kinds``, if given,
    keeps only those (model name, kind) pairs, in that order."""
    pairs = [(p, f"{m.name} {kind}") for m in models for kind, p in model_projections(m).items()]
    if kinds is None:
        return distinct(pairs)
    wanted = [f"{name} {kind}" for name, kind in kinds]
    missing = set(wanted) - {label for _, label in pairs}
    if missing:
        raise KeyError(f"no such projections: {sorted(missing)}")
    picked = {p for p, label in pairs if label in wanted}
    first = {p: min(wanted.index(label) for q, label in pairs if q == p and label in wanted) for p in picked}
    return distinct(((p, label) for p, label in pairs if p in picked), key=first.__getitem__)


PROJECTION_PICKS = (
    ("Llama-3.1-8B", "gate_up"),  # 28672 × 4096, shared by three models: the largest common weight
    ("Llama-3.1-8B", "down"),  # 4096 × 14336: a long K
    ("Qwen2.5-7B", "qkv"),  # 4608 × 3584: sizes off the powers of two
    ("GPT-2 XL", "qkv"),  # 4800 × 1600: K not a multiple of 128
    ("DeepSeek-V3", "kv_a"),  # 576 × 7168: N not a multiple of 128
)
"""The zoo has some 60 distinct projections, too many to time at every token count on a
device budget: the matmul chapters time these, which span it (common and odd, wide and long)."""


@dataclass(frozen=True, order=True)
class AttentionConfig:
    heads: int
    kv_heads: int
    head_dim: int


def attention_configs(models: Sequence[Model] = MODELS, head_dims: Sequence[int] | None = None) -> list[Shared]:
    """Distinct (heads, kv heads, head dim) of the models with standard (not latent) attention,
    largest head dim first; ``head_dims`` keeps only those sizes (what a kernel supports)."""
    return distinct(
        (
            (AttentionConfig(m.heads, m.kv_heads, m.head_dim), m.name)
            for m in models
            if m.mla is None and (head_dims is None or m.head_dim in head_dims)
        ),
        key=lambda c: (-c.head_dim, c.heads, c.kv_heads),
    )


def most_shared(shared: Sequence[Shared]) -> Shared:
    """The value the most models share (the first in order on a tie)."""
    return max(shared, key=lambda s: len(s.models))
