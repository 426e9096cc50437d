"""rope: forward and both gradients against Hugging Face's formula in float64, layouts, edges, bad inputs."""

from academy import DEVICE, INTERPRETED
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor, tolerance

import pytest
import torch
import triton

from examples.rope import kernel
from examples.rope.kernel import apply_rotary_pos_emb, pick_config, reference, rope, rope_cos_sin

SHAPES = [  # (B, H_q, H_kv, S, D)
    (2, 4, 2, 7, 16),  # grouped-query attention, odd S
    (1, 3, 1, 5, 64),
    (2, 2, 2, 9, 128),  # multi-head attention
    (3, 5, 5, 1, 8),  # one token per sequence (decode)
    (1, 6, 2, 3, 96),  # D / 2 = 48: not a power of two, the columns are masked
]
CONFIGS = [  # small tiles, so that rows span several blocks and head ranges straddle q and k
    {"BLOCK_S": 2, "BLOCK_H": 1, "HEAD_BLOCKS": 1},
    {"BLOCK_S": 4, "BLOCK_H": 2, "HEAD_BLOCKS": 2},
    {"BLOCK_S": 1, "BLOCK_H": 4, "HEAD_BLOCKS": 5, "num_warps": 2},
]


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, kernel)


def _inputs(B, H_q, H_kv, S, D, dtype=torch.float32, cos_batch=None, real=False):
    q = random_tensor((B, H_q, S, D), dtype, requires_grad=True)
    k = random_tensor((B, H_kv, S, D), dtype, requires_grad=True)
    if real:  # positions from an offset, as in decode after a prompt
        positions = torch.arange(S, device=DEVICE).expand(cos_batch or B, S) + 1000
        cos, sin = rope_cos_sin(positions, D, dtype=dtype)
    else:  # any cos and sin: the formula does not assume that the halves are copies
        cos = random_tensor((cos_batch or B, S, D), dtype)
        sin = random_tensor((cos_batch or B, S, D), dtype)
    return q, k, cos, sin


def _float64(q, k, cos, sin, dq_embed, dk_embed):
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    q_embed, k_embed = apply_rotary_pos_emb(q64, k64, cos.double(), sin.double())
    torch.autograd.backward((q_embed, k_embed), (dq_embed.double(), dk_embed.double()))
    return q_embed.detach(), k_embed.detach(), q64.grad, k64.grad


def _baseline(q, k, cos, sin, dq_embed, dk_embed):
    """Hugging Face's formula in the inputs' dtype: what fp16/bf16 can hope for."""
    q_, k_ = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    q_embed, k_embed = apply_rotary_pos_emb(q_, k_, cos, sin)
    torch.autograd.backward((q_embed, k_embed), (dq_embed, dk_embed))
    return q_embed.detach(), k_embed.detach(), q_.grad, k_.grad


def _check(q, k, cos, sin, config=None):
    q_embed, k_embed = rope(q, k, cos, sin, config=config)
    dq_embed, dk_embed = random_tensor(q_embed.shape, q.dtype), random_tensor(k_embed.shape, k.dtype)
    torch.autograd.backward((q_embed, k_embed), (dq_embed, dk_embed))
    got = (q_embed, k_embed, q.grad, k.grad)
    assert all(t.dtype == q.dtype for t in got)
    expected = _float64(q, k, cos, sin, dq_embed, dk_embed)
    base = _baseline(q, k, cos, sin, dq_embed, dk_embed) if q.dtype != torch.float32 else (None,) * 4
    for name, g, e, b in zip(("q_embed", "k_embed", "dq", "dk"), got, expected, base):
        assert_close(g, e, dtype=q.dtype, baseline=b, name=name)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_forward_and_backward(shape, dtype):
    B = shape[0]
    _check(*_inputs(*shape, dtype=dtype, cos_batch=1 if B % 2 else B))


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("cos_batch", ["1", "B"])
def test_small_tiles(config, cos_batch):
    B = 2
    _check(*_inputs(B, 5, 1, 11, 16, cos_batch=1 if cos_batch == "1" else B), config=config)


@pytest.mark.parametrize("D", [64, 128])
def test_real_cos_sin(D):
    _check(*_inputs(2, 4, 2, 5, D, real=True))


def test_reference_is_the_definition():
    """The bench checks every provider against ``reference`` (fp32 inside, rounded once)."""
    q, k, cos, sin = _inputs(2, 3, 1, 6, 16, dtype=torch.bfloat16)
    expected = apply_rotary_pos_emb(q.double(), k.double(), cos.double(), sin.double())
    for got, exp in zip(reference(q, k, cos, sin), expected):
        assert got.dtype == torch.bfloat16
        assert_close(got, exp)


TOKEN_TILES = [None, {"BLOCK_S": 1, "BLOCK_H": 8, "HEAD_BLOCKS": 3}, {"BLOCK_S": 4, "BLOCK_H": 8, "HEAD_BLOCKS": 3}]


@pytest.mark.parametrize("config", TOKEN_TILES, ids=str)
def test_fused_qkv_views_are_read_in_place(config):
    """q and k as transformers makes them: one (B, S, H, D) projection, viewed and transposed, with
    the tiles across heads that such views get on long sequences (12 query heads: a partial block)."""
    B, S, H_q, H_kv, D = 2, 7, 12, 3, 32
    qkv = random_tensor((B, S, H_q + 2 * H_kv, D), requires_grad=True)
    q, k = qkv[:, :, :H_q].transpose(1, 2), qkv[:, :, H_q : H_q + H_kv].transpose(1, 2)
    cos, sin = random_tensor((1, S, D)), random_tensor((1, S, D))
    q_embed, k_embed = rope(q, k, cos, sin, config=config)
    dq_embed, dk_embed = random_tensor(q_embed.shape), random_tensor(k_embed.shape)
    torch.autograd.backward((q_embed, k_embed), (dq_embed, dk_embed))
    qkv64 = qkv.detach().double().requires_grad_()
    q64, k64 = qkv64[:, :, :H_q].transpose(1, 2), qkv64[:, :, H_q : H_q + H_kv].transpose(1, 2)
    ref_q, ref_k = apply_rotary_pos_emb(q64, k64, cos.double(), sin.double())
    torch.autograd.backward((ref_q, ref_k), (dq_embed.double(), dk_embed.double()))
    assert_close(q_embed, ref_q)
    assert_close(k_embed, ref_k)
    assert_close(qkv.grad, qkv64.grad)
    assert (qkv.grad[:, :, H_q + H_kv :] == 0).all()  # v's part: no gradient from rope


def test_outputs_and_gradients_keep_the_inputs_layout():
    """A (B, S, H, D) projection viewed as (B, H, S, D) gets outputs and gradients in (B, S, H, D) order."""
    q = random_tensor((2, 9, 3, 16)).transpose(1, 2).requires_grad_()
    k = random_tensor((2, 9, 1, 16)).transpose(1, 2).requires_grad_()
    cos, sin = random_tensor((1, 9, 16)), random_tensor((1, 9, 16))
    q_embed, k_embed = rope(q, k, cos, sin)
    torch.autograd.backward((q_embed, k_embed), (random_tensor(q_embed.shape), random_tensor(k_embed.shape)))
    for got, like in ((q_embed, q), (k_embed, k), (q.grad, q), (k.grad, k)):
        assert _strides(got) == _strides(like)


def _strides(t):
    """The strides that matter: a dimension of size 1 may have any."""
    return [s for s, n in zip(t.stride(), t.shape) if n > 1]


def test_contiguous_inputs_give_contiguous_outputs():
    q, k, cos, sin = _inputs(2, 3, 1, 5, 16)
    q_embed, k_embed = rope(q, k, cos, sin)
    assert q_embed.is_contiguous() and k_embed.is_contiguous()


def test_strided_batch_heads_and_cos():
    """Non-contiguous batch and head strides (every other head of a wider tensor), cos expanded over the batch."""
    wide_q = random_tensor((3, 8, 5, 16))
    wide_k = random_tensor((3, 4, 5, 16))
    q, k = wide_q[:, ::2].requires_grad_(), wide_k[:, 1::2].requires_grad_()
    cos, sin = random_tensor((1, 5, 16)).expand(3, 5, 16), random_tensor((1, 5, 16)).expand(3, 5, 16)
    assert cos.stride(0) == 0 and not q.is_contiguous()
    _check(q, k, cos, sin)


def test_cos_and_sin_with_different_strides():
    q, k, cos, _ = _inputs(2, 2, 1, 6, 16)
    sin = random_tensor((6, 2, 16)).transpose(0, 1)  # (B, S, D) with the batch stride smaller than S's
    _check(q, k, cos, sin)


def test_expanded_output_gradients():
    """loss = q_embed.sum() hands the backward a gradient of stride 0 everywhere."""
    q, k, cos, sin = _inputs(2, 3, 1, 5, 16)
    q_embed, k_embed = rope(q, k, cos, sin)
    (q_embed.sum() + k_embed.sum()).backward()
    expected = _float64(q, k, cos, sin, torch.ones_like(q_embed), torch.ones_like(k_embed))
    assert_close(q.grad, expected[2])
    assert_close(k.grad, expected[3])


def test_only_q_embed_used():
    q, k, cos, sin = _inputs(2, 3, 1, 5, 16)
    q_embed, _ = rope(q, k, cos, sin)
    dq_embed = random_tensor(q_embed.shape)
    q_embed.backward(dq_embed)
    expected = _float64(q, k, cos, sin, dq_embed, torch.zeros(k.shape, device=DEVICE))
    assert_close(q.grad, expected[2])
    assert torch.equal(k.grad, torch.zeros_like(k))


def test_inputs_are_never_written():
    q, k, cos, sin = _inputs(2, 3, 1, 5, 16)
    before = [t.detach().clone() for t in (q, k, cos, sin)]
    q_embed, k_embed = rope(q, k, cos, sin)
    dq_embed, dk_embed = random_tensor(q_embed.shape), random_tensor(k_embed.shape)
    grads_before = dq_embed.clone(), dk_embed.clone()
    torch.autograd.backward((q_embed, k_embed), (dq_embed, dk_embed))
    assert all(torch.equal(t.detach(), b) for t, b in zip((q, k, cos, sin), before))
    assert torch.equal(dq_embed, grads_before[0]) and torch.equal(dk_embed, grads_before[1])


def test_no_grad():
    q, k, cos, sin = _inputs(2, 3, 1, 5, 16)
    with torch.no_grad():
        q_embed, k_embed = rope(q, k, cos, sin)
    assert not q_embed.requires_grad and not k_embed.requires_grad
    q_embed, _ = rope(q.detach(), k.detach(), cos, sin)
    assert not q_embed.requires_grad
    assert_close(q_embed, apply_rotary_pos_emb(q.double(), k.double(), cos.double(), sin.double())[0])


@pytest.mark.parametrize("shape", [(2, 3, 1, 0, 16), (0, 3, 1, 5, 16), (2, 3, 0, 4, 8)], ids=str)
def test_empty(shape):
    """S = 0, B = 0, or no key heads: correct (empty) outputs and gradients."""
    B, H_q, H_kv, S, D = shape
    q = random_tensor((B, H_q, S, D), requires_grad=True)
    k = random_tensor((B, H_kv, S, D), requires_grad=True)
    cos, sin = random_tensor((1, S, D)), random_tensor((1, S, D))
    q_embed, k_embed = rope(q, k, cos, sin)
    assert q_embed.shape == q.shape and k_embed.shape == k.shape
    dq_embed, dk_embed = random_tensor(q.shape), random_tensor(k.shape)
    torch.autograd.backward((q_embed, k_embed), (dq_embed, dk_embed))
    assert q.grad.shape == q.shape and k.grad.shape == k.shape
    expected = _float64(q, k, cos, sin, dq_embed, dk_embed)
    for got, exp in zip((q_embed, k_embed, q.grad, k.grad), expected):
        if exp.numel():  # q when there are no key heads
            assert_close(got, exp)


def test_double_backward_raises():
    q, k, cos, sin = _inputs(1, 2, 1, 3, 8)
    q_embed, k_embed = rope(q, k, cos, sin)
    (dq,) = torch.autograd.grad((q_embed * q_embed).sum() + k_embed.sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="twice"):
        dq.sum().backward()


def test_cos_and_sin_are_not_differentiated():
    q, k, cos, sin = _inputs(1, 2, 1, 3, 8)
    with pytest.raises(ValueError, match="does not differentiate cos and sin"):
        rope(q, k, cos.requires_grad_(), sin)
    with torch.no_grad():
        rope(q, k, cos, sin)  # nothing to differentiate: accepted
    rope(q, k, cos.detach(), sin)


def _t(shape, dtype=torch.float32, device=DEVICE):
    return torch.ones(shape, dtype=dtype, device=device)


Q, K, CS = (2, 4, 5, 8), (2, 2, 5, 8), (1, 5, 8)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (([1.0], _t(K), _t(CS), _t(CS)), TypeError, "q must be a torch.Tensor"),
        ((_t(Q, torch.int32), _t(K, torch.int32), _t(CS, torch.int32), _t(CS, torch.int32)), TypeError, "q has dtype"),
        ((_t(Q), _t(K, torch.float16), _t(CS), _t(CS)), TypeError, "dtypes differ: q torch.float32 vs k"),
        ((_t(Q), _t(K), _t(CS, torch.float16), _t(CS, torch.float16)), TypeError, "vs cos"),
        ((_t(Q), _t(K), _t(CS, device="meta"), _t(CS)), ValueError, "cos is on meta"),
        ((_t((2, 5, 8)), _t(K), _t(CS), _t(CS)), ValueError, "4-D"),
        ((_t(Q), _t(K), _t((5, 8)), _t((5, 8))), ValueError, "3-D"),
        ((_t(Q), _t(K), _t(CS), _t((2, 5, 8))), ValueError, "of one shape"),
        ((_t(Q), _t((3, 2, 5, 8)), _t(CS), _t(CS)), ValueError, "must agree in batch"),
        ((_t(Q), _t((2, 2, 6, 8)), _t(CS), _t(CS)), ValueError, "must agree in batch, seq_len"),
        ((_t(Q), _t((2, 2, 5, 6)), _t(CS), _t(CS)), ValueError, "head_dim"),
        ((_t(Q), _t(K), _t((3, 5, 8)), _t((3, 5, 8))), ValueError, r"\(2 or 1, 5, 8\)"),
        ((_t(Q), _t(K), _t((1, 4, 8)), _t((1, 4, 8))), ValueError, "must be \\(batch or 1, seq_len, head_dim\\)"),
        ((_t((2, 4, 5, 7)), _t((2, 2, 5, 7)), _t((1, 5, 7)), _t((1, 5, 7))), ValueError, "must be even"),
        ((_t((2, 4, 8, 5)).transpose(2, 3), _t(K), _t(CS), _t(CS)), ValueError, "q must have unit stride"),
        ((_t(Q), _t(K), _t((1, 8, 5)).transpose(1, 2), _t(CS)), ValueError, "cos must have unit stride"),
    ],
)
def test_rejects_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        rope(*args)


@pytest.mark.parametrize(
    ("config", "match"),
    [({"BLOCK_M": 4}, "unknown config key"), ({"BLOCK_S": 3}, "power of two"), ({"HEAD_BLOCKS": 0}, "positive")],
)
def test_rejects_bad_config(config, match):
    with pytest.raises(ValueError, match=match):
        rope(_t(Q), _t(K), _t(CS), _t(CS), config=config)


def test_rejects_too_many_programs():
    huge = torch.ones(1, 1, 1, 2, device=DEVICE).expand(2**31, 1, 1, 2)  # 2**31 sequences, 2 values in memory
    cos = torch.ones(1, 1, 2, device=DEVICE)
    with pytest.raises(ValueError, match="too many for one launch"):
        rope(huge, huge, cos, cos)


@pytest.mark.parametrize(
    "shape",
    [(1, 32, 8, 4096, 128), (16, 32, 8, 1, 128), (1, 28, 4, 16384, 128), (2, 14, 2, 3000, 64), (1, 8, 4, 7, 256)],
)
@pytest.mark.parametrize("heads_adjacent", [False, True], ids=["head-major", "heads-adjacent"])
def test_pick_config(shape, heads_adjacent):
    B, H_q, H_kv, S, D = shape
    cfg = pick_config(B, S, H_q, H_kv, D, heads_adjacent)
    half = triton.next_power_of_2(D // 2)
    for key in ("BLOCK_S", "BLOCK_H"):
        assert cfg[key] & (cfg[key] - 1) == 0
    assert cfg["BLOCK_S"] * cfg["BLOCK_H"] * half <= max(kernel.TILE, half)
    head_blocks = triton.cdiv(H_q, cfg["BLOCK_H"]) + triton.cdiv(H_kv, cfg["BLOCK_H"])
    groups = triton.cdiv(head_blocks, cfg["HEAD_BLOCKS"])
    programs = B * triton.cdiv(S, cfg["BLOCK_S"]) * groups
    assert programs >= min(kernel.MIN_PROGRAMS, B * triton.cdiv(S, cfg["BLOCK_S"]) * head_blocks)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((1, 32, 8, 4096, 128), (1, 8, 5)),  # a prefill: one position, 8 heads, every head per program
        ((1, 14, 2, 4096, 64), (4, 8, 3)),  # half as wide a head: four positions
        ((1, 32, 32, 4096, 96), (1, 8, 8)),
        ((1, 8, 4, 4096, 256), (16, 1, 3)),  # wider heads keep the head-major tile
        ((16, 32, 8, 1, 128), (1, 32, 1)),  # decode: too few positions to fill the GPU
    ],
)
def test_token_tile_when_heads_are_adjacent(shape, expected):
    """A (B, S, H, D) projection viewed as (B, H, S, D) keeps each position's heads side by side:
    those shapes get a tile across heads, one program per few positions, when positions fill the GPU."""
    B, H_q, H_kv, S, D = shape
    cfg = pick_config(B, S, H_q, H_kv, D, heads_adjacent=True)
    assert (cfg["BLOCK_S"], cfg["BLOCK_H"], cfg["HEAD_BLOCKS"]) == expected


def test_launch_reads_the_layout_from_the_strides():
    q = torch.empty(1, 4096, 32, 128, device="meta").transpose(1, 2)
    cfg, *_ = kernel.launch_plan(q, 8, None)
    assert cfg["BLOCK_S"] == 1
    cfg, *_ = kernel.launch_plan(q.contiguous(), 8, None)
    assert cfg["BLOCK_S"] == kernel.MAX_BLOCK_S


@pytest.mark.skipif(INTERPRETED, reason="large shapes: GPU only")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_llama_shape_on_the_gpu(dtype):
    """Llama-3.1-8B's heads at S = 2048, q and k from one fused projection, against float64."""
    B, S, H_q, H_kv, D = 2, 2048, 32, 8, 128
    qkv = random_tensor((B, S, H_q + 2 * H_kv, D), dtype, requires_grad=True)
    q, k = qkv[:, :, :H_q].transpose(1, 2), qkv[:, :, H_q : H_q + H_kv].transpose(1, 2)
    cos, sin = rope_cos_sin(torch.arange(S, device=DEVICE).expand(B, S), D, base=500000.0, dtype=dtype)
    q_embed, k_embed = rope(q, k, cos, sin)
    dq_embed, dk_embed = random_tensor(q_embed.shape, dtype), random_tensor(k_embed.shape, dtype)
    torch.autograd.backward((q_embed, k_embed), (dq_embed, dk_embed))
    qkv64 = qkv.detach().double().requires_grad_()
    q64, k64 = qkv64[:, :, :H_q].transpose(1, 2), qkv64[:, :, H_q : H_q + H_kv].transpose(1, 2)
    ref_q, ref_k = apply_rotary_pos_emb(q64, k64, cos.double(), sin.double())
    torch.autograd.backward((ref_q, ref_k), (dq_embed.double(), dk_embed.double()))
    for got, exp in ((q_embed, ref_q), (k_embed, ref_k), (qkv.grad, qkv64.grad)):
        assert_close(got, exp, tol=tolerance(dtype))
