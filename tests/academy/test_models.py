"""The model zoo: every configuration complete and cited, and the shapes it gives the chapters distinct."""

from __future__ import annotations

import dataclasses
import re

from academy.bench import models
from academy.bench.models import MODELS, Model, Projection

import pytest

REQUIRED = ("name", "repo", "hidden", "heads", "kv_heads", "head_dim", "vocab", "mlp", "norm", "file")


@pytest.mark.parametrize("m", MODELS, ids=lambda m: m.name)
def test_every_model_has_every_field_and_cites_its_config(m: Model):
    for name in REQUIRED:
        assert getattr(m, name) not in (None, "", 0), f"{m.name}: {name} missing"
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", m.repo), f"{m.name}: {m.repo!r} is not a Hugging Face repo id"
    assert m.file.endswith(".json") and m.source == f"https://huggingface.co/{m.repo}/blob/main/{m.file}"
    assert m.mlp in ("swiglu", "geglu", "gelu") and m.norm in ("rmsnorm", "layernorm")
    assert m.mlp_widths, f"{m.name}: no MLP width (dense or expert)"
    assert m.heads % m.kv_heads == 0, "each key/value head serves a whole number of query heads"
    moe = (m.expert_intermediate, m.experts, m.experts_per_token)
    assert all(v is None for v in moe) or all(v is not None for v in moe), f"{m.name}: MoE fields half filled"
    if m.intermediate is None:
        assert m.expert_intermediate is not None and "intermediate" in dict(m.derived)
    fields = {f.name for f in dataclasses.fields(Model)}
    assert {name for name, _ in m.derived} <= fields, "derived names real fields"


@pytest.mark.parametrize("m", MODELS, ids=lambda m: m.name)
def test_head_dim_agrees_with_the_config(m: Model):
    """Without a head_dim key, the config implies head_dim = hidden / heads; latent attention's is nope + rope."""
    if m.mla is not None:
        assert m.head_dim == m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim
    elif not m.head_dim_listed:
        assert m.heads * m.head_dim == m.hidden


def test_the_zoo_holds_the_named_models_once():
    names = [m.name for m in MODELS]
    assert len(names) == len(set(names))
    for name in (
        "GPT-2",
        "GPT-2 XL",
        "Llama-2-7B",
        "Llama-3.1-8B",
        "Llama-3.1-70B",
        "Mistral-7B",
        "Mixtral-8x7B",
        "Qwen2.5-0.5B",
        "Qwen2.5-7B",
        "Qwen2.5-72B",
        "Gemma-2-2B",
        "Gemma-2-9B",
        "Phi-3-mini",
        "DeepSeek-V3",
    ):
        assert models.model(name).name == name
    assert len(MODELS) >= 17
    with pytest.raises(KeyError, match="no model"):
        models.model("GPT-5")


def test_gemma_2_carries_its_softcaps():
    for name in ("Gemma-2-2B", "Gemma-2-9B"):
        m = models.model(name)
        assert (m.attn_logit_softcap, m.final_logit_softcap) == (50.0, 30.0)
        assert m.head_dim == 256 and m.mlp == "geglu"
    assert all(m.attn_logit_softcap is None for m in MODELS if not m.name.startswith("Gemma-2"))


def _check_distinct(shared):
    values = [s.value for s in shared]
    assert len(values) == len(set(values)), "deduplicated"
    assert all(s.models and len(s.models) == len(set(s.models)) and s.label for s in shared)
    return values


def test_the_generators_return_distinct_labelled_values():
    hidden = _check_distinct(models.hidden_sizes())
    assert hidden == sorted(hidden) and set(hidden) == {m.hidden for m in MODELS}
    glu = _check_distinct(models.glu_widths())
    assert 3072 not in glu and 6400 not in glu, "GPT-2's MLP is not gated"
    assert 2048 in glu and 14336 in glu, "expert widths count (DeepSeek-V3, Mixtral)"
    vocabs = _check_distinct(models.vocabularies())
    assert {50257, 32000, 32064, 128256, 129280, 151936, 152064, 256000} <= set(vocabs)
    assert _check_distinct(models.projections())
    assert _check_distinct(models.attention_configs())
    assert _check_distinct(models.head_counts())
    shared = {s.value: s.models for s in models.hidden_sizes()}
    assert shared[4096] == ("Llama-2-7B", "Llama-3.1-8B", "Mistral-7B", "Mixtral-8x7B", "Qwen3-8B")
    assert [s.value for s in models.hidden_sizes(norm="layernorm")] == [768, 1600]


def test_projections_of_a_grouped_query_model_and_of_latent_attention():
    llama = models.model_projections(models.model("Llama-3.1-8B"))
    assert llama == {
        "qkv": Projection(6144, 4096),  # (32 + 2·8) heads × 128
        "o": Projection(4096, 4096),
        "gate_up": Projection(28672, 4096),
        "down": Projection(4096, 14336),
    }
    gpt2 = models.model_projections(models.model("GPT-2"))
    assert gpt2["up"] == Projection(3072, 768) and "gate_up" not in gpt2
    deepseek = models.model_projections(models.model("DeepSeek-V3"))
    assert deepseek["kv_a"] == Projection(576, 7168) and deepseek["o"] == Projection(7168, 16384)
    assert deepseek["expert_gate_up"] == Projection(4096, 7168) and "qkv" not in deepseek
    assert {kind for m in MODELS for kind in models.model_projections(m)} <= set(models.PROJECTION_KINDS)


def test_picked_projections_keep_the_order_asked_and_name_every_sharer():
    picked = models.projections(kinds=[("Qwen2.5-7B", "qkv"), ("Llama-3.1-8B", "gate_up")])
    assert [p.value for p in picked] == [Projection(4608, 3584), Projection(28672, 4096)]
    assert picked[1].models == ("Llama-3.1-8B gate_up", "Mistral-7B gate_up", "Mixtral-8x7B gate_up")
    assert len(models.projections(kinds=models.PROJECTION_PICKS)) == len(models.PROJECTION_PICKS)
    with pytest.raises(KeyError, match="no such projections"):
        models.projections(kinds=[("GPT-2", "qkv_b")])


def test_attention_configs_filter_head_dims_and_leave_latent_attention_out():
    every = models.attention_configs()
    assert all(s.value.head_dim != 192 for s in every), "DeepSeek-V3's latent attention is not standard"
    kept = models.attention_configs(head_dims=(64, 128))
    assert {s.value.head_dim for s in kept} == {64, 128}
    common = models.most_shared(kept)
    assert (common.value.heads, common.value.kv_heads, common.value.head_dim) == (32, 8, 128)
    assert "Llama-3.1-8B" in common.models


def test_token_counts():
    assert models.DECODE_TOKENS == (1, 16)
    assert min(models.PREFILL_TOKENS) >= 2048 and max(models.PREFILL_TOKENS) <= 16384
    assert models.SEQUENCE_LENGTHS[0] == 1024 and models.SEQUENCE_LENGTHS[-1] == 32768
    assert models.RAGGED_TOKENS % 16 != 0 and 2048 <= models.RAGGED_TOKENS <= 4096


def test_a_zoo_sweep_has_one_labelled_shape_per_distinct_value():
    built = models.sweep("models M=8", "N", models.vocabularies(), lambda v: {"M": 8, "N": v}, metric="bandwidth")
    assert built.shapes[0] == {"M": 8, "N": 32000} and built.labels[0] == "Llama-2-7B, Mistral-7B, Mixtral-8x7B"
    assert len(built.shapes) == len(built.labels) == len(models.vocabularies()) and built.metric == "bandwidth"
