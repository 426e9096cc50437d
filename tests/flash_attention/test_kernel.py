"""Attention forward and backward against float64 PyTorch: every path and stage, ragged lengths,
grouped-query heads, causal with S_q ≠ S_k (bottom-right aligned), fully masked rows, bad inputs;
head size 64 throughout, 128 and 256 in tests of their own.

Under the interpreter the kernels upcast fp16/bf16 tiles to fp32 and bf16 stores truncate, so
bf16 is checked forward only on the CPU; on a GPU the same tests check bf16 gradients too.
"""

import json
import math
import os
import re
import subprocess
import sys

from academy import DEVICE, INTERPRETED
from academy.testing import assert_close, assert_no_second_derivative, poison_allocations, random_tensor

import numpy as np
import pytest
import torch

from examples.flash_attention import kernel as fa
from examples.flash_attention import stages
from examples.flash_attention.kernel import attention, attention_flops, causal_mask, reference
from examples.flash_attention.stages import naive_attention

DTYPES = [torch.float16, torch.bfloat16]
OPS = {
    "tma": lambda *a, **kw: attention(*a, path="tma", **kw),
    "pointer": lambda *a, **kw: attention(*a, path="pointer", **kw),
    **stages.STAGES,
}
# (B, H, H_kv, S_q, S_k): ragged lengths, more rows than keys and the reverse, grouped-query heads
SHAPES = [(1, 2, 2, 37, 37), (2, 1, 1, 23, 45), (1, 4, 2, 45, 29), (1, 3, 1, 16, 16), (2, 4, 1, 1, 45)]  # last: decode
if not INTERPRETED:
    SHAPES += [(2, 4, 2, 1000, 1000), (1, 8, 1, 333, 1111)]


GLUON = fa._gluon("forward")
GLUON_BACKWARD = fa._gluon("backward")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLUON_GPU = (
    GLUON is not None and not INTERPRETED and torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
)


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, fa)
    poison_allocations(monkeypatch, stages)
    if GLUON is not None:
        poison_allocations(monkeypatch, GLUON)


def inputs(shape, dtype, d=64, requires_grad=False):
    B, H, H_kv, S_q, S_k = shape
    q = random_tensor((B, H, S_q, d), dtype, requires_grad=requires_grad)
    k = random_tensor((B, H_kv, S_k, d), dtype, requires_grad=requires_grad)
    v = random_tensor((B, H_kv, S_k, d), dtype, requires_grad=requires_grad)
    return q, k, v


def gradients64(q, k, v, grad, causal, sm_scale=None):
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    out = reference(q64, k64, v64, causal, sm_scale)
    out.backward(grad.double())
    return out, q64.grad, k64.grad, v64.grad


def fits(op, shape, d):
    return op != "naive" or max(16, 1 << (shape[4] - 1).bit_length()) * d <= stages.NAIVE_MAX_ELEMENTS


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}H{}/{}S{}x{}".format(*s))
@pytest.mark.parametrize("op", list(OPS))
def test_forward_and_backward_fp16(op, shape, causal):
    if not fits(op, shape, 64):
        pytest.skip("the naive kernel holds a whole row: short sequences only")
    q, k, v = inputs(shape, torch.float16, requires_grad=True)
    check_output_and_gradients(OPS[op](q, k, v, causal=causal), q, k, v, causal, op)


def check_output_and_gradients(out, q, k, v, causal, label):
    """o, dq, dk, dv of a call that took q, k, v against float64 autograd, for a fresh random gradient."""
    grad = random_tensor(tuple(out.shape), q.dtype)
    out.backward(grad)
    expected = gradients64(q, k, v, grad, causal)
    for name, got, want in zip(("o", "dq", "dk", "dv"), (out, q.grad, k.grad, v.grad), expected):
        assert got.shape == want.shape and got.dtype == q.dtype
        assert_close(got, want, dtype=q.dtype, name=f"{label} {name}")


# The backward has two forms: fused (the dK/dV kernel adds dQ with atomics into an fp32 buffer) and
# split (a dQ kernel of its own). The table picks one per problem; both are checked here by name.
# Several key blocks and query blocks per head, so the fused loop's rotated start wraps around.
if INTERPRETED:
    KV_CFG = dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1)
    Q_CFG = dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1)
    BWD_SHAPES = [(1, 4, 2, 45, 70), (1, 2, 2, 70, 45), (2, 3, 1, 37, 37), (1, 2, 1, 50, 9)]
else:
    KV_CFG = dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=2)
    Q_CFG = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)
    BWD_SHAPES = [(1, 4, 2, 450, 700), (1, 2, 2, 700, 450), (2, 3, 1, 1000, 1000), (1, 2, 1, 500, 90)]


@pytest.mark.parametrize("form", ["fused", "split"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", BWD_SHAPES, ids=lambda s: "B{}H{}/{}S{}x{}".format(*s))
def test_both_backward_forms_against_float64(form, shape, causal):
    """dQ, dK, dV of either form against float64 autograd: ragged lengths, GQA, S_q ≠ S_k both ways."""
    q, k, v = inputs(shape, torch.float16)
    scale = 1 / 8
    o, lse = fa.flash_forward(q, k, v, causal, scale)
    do = random_tensor(tuple(o.shape), torch.float16)
    configs = (KV_CFG, None if form == "fused" else Q_CFG)
    got = fa.flash_backward(q, k, v, o, lse, do, causal, scale, configs=configs)
    expected = gradients64(q, k, v, do, causal, scale)[1:]
    for name, g, want in zip(("dq", "dk", "dv"), got, expected):
        assert g.shape == want.shape and g.dtype == torch.float16
        assert_close(g, want, dtype=torch.float16, name=f"{form} {name}")


# Head size 256 (Gemma-2, Gemma-3): its own tiles on a GPU, and the split backward there; both forward
# paths, grouped-query heads 4 and 8 to a key/value head, ragged S_q ≠ S_k both ways.
D256_SHAPES = [(1, 4, 1, 37, 29), (1, 8, 1, 23, 45)]
if not INTERPRETED:
    D256_SHAPES += [(2, 4, 1, 1000, 1000), (1, 8, 1, 333, 1111), (1, 16, 2, 4100, 3000)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", D256_SHAPES, ids=lambda s: "B{}H{}/{}S{}x{}".format(*s))
@pytest.mark.parametrize("path", ["tma", "pointer"])
def test_head_dim_256_forward_and_backward_fp16(path, shape, causal):
    q, k, v = inputs(shape, torch.float16, d=256, requires_grad=True)
    check_output_and_gradients(attention(q, k, v, causal=causal, path=path), q, k, v, causal, path)


@pytest.mark.parametrize("form", ["fused", "split"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_both_backward_forms_at_head_dim_256(form, causal):
    """The table runs the split form at D = 256; the fused one is still correct when asked for. On a GPU
    with the table's own D = 256 tiles, where several key and query blocks wrap the rotated start; the fused
    form in one pipeline stage, since its dQ tile leaves no room for a second (270 KiB of shared memory)."""
    if INTERPRETED:
        shape, configs = (1, 4, 1, 45, 70), (KV_CFG, None if form == "fused" else Q_CFG)
    elif form == "fused":
        shape, configs = (1, 8, 1, 700, 450), (dict(fa.D256_BWD[0], num_stages=1), None)
    else:
        shape, configs = (1, 8, 1, 700, 450), fa.D256_BWD
    q, k, v = inputs(shape, torch.float16, d=256)
    scale = 1 / 16
    o, lse = fa.flash_forward(q, k, v, causal, scale)
    do = random_tensor(tuple(o.shape), torch.float16)
    got = fa.flash_backward(q, k, v, o, lse, do, causal, scale, configs=configs)
    expected = gradients64(q, k, v, do, causal, scale)[1:]
    for name, g, want in zip(("dq", "dk", "dv"), got, expected):
        assert_close(g, want, dtype=torch.float16, name=f"{form} {name}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [128, 256])
def test_wide_head_dims_and_dtypes(d, dtype, causal):
    q, k, v = inputs((1, 2, 1, 40, 50), dtype, d=d, requires_grad=not INTERPRETED)
    out = attention(q, k, v, causal=causal)
    if INTERPRETED:  # bf16 stores truncate under the interpreter: forward only there
        assert_close(out, reference(q.double(), k.double(), v.double(), causal), dtype=dtype)
        return
    grad = random_tensor(tuple(out.shape), dtype)
    out.backward(grad)
    for name, got, want in zip(
        ("o", "dq", "dk", "dv"), (out, q.grad, k.grad, v.grad), gradients64(q, k, v, grad, causal)
    ):
        assert_close(got, want, dtype=dtype, name=name)


@pytest.mark.parametrize("sm_scale", [0.05, 0.5])
def test_explicit_scale(sm_scale):
    q, k, v = inputs((1, 2, 2, 33, 33), torch.float16)
    assert_close(
        attention(q, k, v, True, sm_scale),
        reference(q.double(), k.double(), v.double(), True, sm_scale),
        dtype=torch.float16,
    )


@pytest.mark.parametrize("s_q, s_k", [(20, 20), (13, 40), (40, 13)])
def test_causal_is_bottom_right_against_an_explicit_mask(s_q, s_k):
    """PyTorch's SDPA with the mask written out (not our reference): j <= i + S_k - S_q."""
    q, k, v = inputs((1, 2, 2, s_q, s_k), torch.float16)
    mask = causal_mask(s_q, s_k, q.device)
    i, j = torch.meshgrid(torch.arange(s_q), torch.arange(s_k), indexing="ij")
    assert torch.equal(mask.cpu(), j - i <= s_k - s_q)
    expected = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    expected = torch.nan_to_num(expected) * mask.any(-1, keepdim=True)  # rows that see nothing: 0, not NaN
    assert_close(attention(q, k, v, causal=True), expected, dtype=torch.float16)


def test_causal_agrees_with_sdpa_is_causal_when_lengths_match():
    q, k, v = inputs((2, 2, 2, 29, 29), torch.float16)
    expected = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    assert_close(attention(q, k, v, causal=True), expected, dtype=torch.float16)


@pytest.mark.parametrize("op", list(OPS))
def test_rows_that_see_no_key_are_zero_and_finite(op):
    """S_q > S_k, causal: the first S_q - S_k rows see no key (−inf − −inf would be NaN)."""
    q, k, v = inputs((1, 2, 2, 40, 12), torch.float16, requires_grad=True)
    out = OPS[op](q, k, v, causal=True)
    out.backward(torch.ones_like(out))
    assert torch.equal(out[:, :, :28], torch.zeros_like(out[:, :, :28]))
    assert torch.equal(q.grad[:, :, :28], torch.zeros_like(q.grad[:, :, :28]))
    for t in (out, q.grad, k.grad, v.grad):
        assert torch.isfinite(t).all()


def test_grouped_query_heads_equal_repeated_heads():
    q, k, v = inputs((2, 6, 2, 30, 30), torch.float16, requires_grad=True)
    out = attention(q, k, v, causal=True)
    out.sum().backward()
    k_rep, v_rep = (t.detach().repeat_interleave(3, dim=1).requires_grad_() for t in (k, v))
    q2 = q.detach().clone().requires_grad_()
    out2 = attention(q2, k_rep, v_rep, causal=True)
    out2.sum().backward()
    assert_close(out, out2.detach(), dtype=torch.float16)
    assert_close(q.grad, q2.grad.double(), dtype=torch.float16, name="dq")
    assert_close(k.grad, k_rep.grad.unflatten(1, (2, 3)).sum(2), dtype=torch.float16, name="dk summed over the group")
    assert_close(v.grad, v_rep.grad.unflatten(1, (2, 3)).sum(2), dtype=torch.float16, name="dv summed over the group")


def test_non_contiguous_inputs():
    """q, k, v as (B, S, H, D) tensors transposed to (B, H, S, D): the layout a projection gives."""
    base = [random_tensor((2, 21, 3, 64), torch.float16, requires_grad=True) for _ in range(3)]
    q, k, v = (t.transpose(1, 2) for t in base)
    assert not q.is_contiguous()
    out = attention(q, k, v, causal=True)
    grad = random_tensor(tuple(out.shape), torch.float16)
    out.backward(grad)
    expected = gradients64(q, k, v, grad, True)
    got = (out,) + tuple(t.grad.transpose(1, 2) for t in base)
    for name, g, want in zip(("o", "dq", "dk", "dv"), got, expected):
        assert_close(g, want, dtype=torch.float16, name=name)


def test_saved_lse_is_the_log2_log_sum_exp():
    q, k, v = inputs((1, 2, 2, 24, 40), torch.float16)
    scale = 1 / 8
    o, lse = fa.flash_forward(q, k, v, False, scale)
    scores = q.double() @ k.double().transpose(-1, -2) * scale
    torch.testing.assert_close(lse.double(), torch.logsumexp(scores, -1) / math.log(2), atol=2e-3, rtol=0)


def test_misaligned_inputs_fall_back_to_pointers():
    """A contiguous view that starts one element into its storage: TMA cannot take its address."""
    q, k, v = (random_tensor((1 * 2 * 24 * 64 + 1,), torch.float16)[1:].view(1, 2, 24, 64) for _ in range(3))
    assert q.is_contiguous() and q.data_ptr() % 16
    assert fa.forward_path("auto", q, k, v) == "pointer"
    with pytest.raises(ValueError, match="aligned"):
        attention(q, k, v, path="tma")
    assert_close(
        attention(q, k, v, causal=True), reference(q.double(), k.double(), v.double(), True), dtype=torch.float16
    )


def test_double_backward_is_refused():
    q, k, v = inputs((1, 1, 1, 16, 16), torch.float16, requires_grad=True)
    (dq,) = torch.autograd.grad(attention(q, k, v).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="attention has no second derivative"):  # never a silently wrong one
        dq.sum().backward()
    assert_no_second_derivative(attention, q, k, v)


def test_numpy_causal_and_scale_are_accepted():
    """NumPy scalars are what they say: np.bool_(True) was refused as "causal must be a bool, got bool"."""
    q, k, v = inputs((1, 2, 2, 24, 64), torch.float16)
    out = attention(q, k, v, causal=np.bool_(True), sm_scale=np.float32(0.125))
    assert_close(out, attention(q, k, v, causal=True, sm_scale=0.125), dtype=torch.float16)
    assert_close(out, reference(q.double(), k.double(), v.double(), True, 0.125), dtype=torch.float16)


def test_empty_query_and_flops():
    q, k, v = inputs((1, 2, 2, 0, 5), torch.float16, requires_grad=True)
    out = attention(q, k, v, causal=True)
    assert out.shape == (1, 2, 0, 64)
    out.sum().backward()  # no query attends: dK and dV are written as zeros (outputs are NaN-poisoned)
    assert q.grad.shape == q.shape
    assert torch.equal(k.grad, torch.zeros_like(k)) and torch.equal(v.grad, torch.zeros_like(v))
    assert attention_flops(1, 1, 3, 5, 64) == 4 * 3 * 5 * 64
    assert attention_flops(2, 3, 8, 8, 64, causal=True, mode="fwd+bwd") == 3.5 * 0.5 * 4 * 2 * 3 * 8 * 8 * 64


def test_bad_inputs():
    q, k, v = inputs((1, 2, 2, 8, 8), torch.float16)
    with pytest.raises(TypeError, match="dtype"):
        attention(q.float(), k.float(), v.float())
    with pytest.raises(TypeError, match="dtypes differ"):
        attention(q, k.bfloat16(), v)
    with pytest.raises(ValueError, match="4-D"):
        attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="head_dim"):
        attention(q[..., :32], k[..., :32], v[..., :32])
    with pytest.raises(ValueError, match="multiple"):
        attention(random_tensor((1, 3, 8, 64), torch.float16), k, v)
    with pytest.raises(ValueError, match="one shape"):
        attention(q, k, v[:, :, :4])
    with pytest.raises(ValueError, match="no keys"):
        attention(q, k[:, :, :0], v[:, :, :0])
    for bad in (-1.0, 0, float("nan")):
        with pytest.raises(ValueError, match="sm_scale must be a positive finite number"):
            attention(q, k, v, sm_scale=bad)
    for bad in (True, "0.1"):
        with pytest.raises(TypeError, match="sm_scale must be a real number"):
            attention(q, k, v, sm_scale=bad)
    with pytest.raises(TypeError, match="causal must be a bool, got str"):
        attention(q, k, v, causal="yes")
    with pytest.raises(TypeError, match="causal must be a bool, got int"):
        attention(q, k, v, causal=1)
    with pytest.raises(ValueError, match="path"):
        attention(q, k, v, path="cuda")
    with pytest.raises(TypeError, match="Tensor"):
        attention(q.tolist(), k, v)
    with pytest.raises(ValueError, match="naive"):
        naive_attention(*inputs((1, 1, 1, 8, 600), torch.float16))
    with pytest.raises(ValueError, match="batch or head_dim"):
        attention(q, *inputs((2, 2, 2, 8, 8), torch.float16)[1:])
    with pytest.raises(ValueError, match="multiple"):  # no key/value heads at all
        attention(q, k[:, :0], v[:, :0])
    with pytest.raises(ValueError, match="sm_scale"):
        attention(q, k, v, sm_scale=math.inf)
    with pytest.raises(ValueError, match="kernels run on"):
        attention(q.to("meta"), k, v)
    with pytest.raises(ValueError, match="devices differ|kernels run on"):
        attention(q, k.to("meta"), v)


@pytest.mark.parametrize("d", [32, 96, 512])
def test_unsupported_head_dims_are_refused_naming_the_supported_ones(d):
    q, k, v = inputs((1, 2, 2, 8, 8), torch.float16, d=d)
    with pytest.raises(ValueError, match=rf"head_dim must be one of \(64, 128, 256\), got {d}$"):
        attention(q, k, v)


def test_grid_limit_on_batch_times_heads():
    """B·H rides on the grid's second axis (at most 65535): refused before any launch."""
    q = random_tensor((1, fa.MAX_GRID_Y + 1, 1, 64), torch.float16)
    k = random_tensor((1, 1, 1, 64), torch.float16)
    with pytest.raises(ValueError, match="65535"):
        attention(q, k, k.clone())


@pytest.mark.parametrize("s_k, d", [(257, 128), (513, 64)])
def test_naive_refuses_rows_that_do_not_fit(s_k, d):
    """S_k·D (S_k rounded up to a power of two) at most 32768: S_k ≤ 256 at D = 128, ≤ 512 at D = 64."""
    with pytest.raises(ValueError, match="S_k·D"):
        naive_attention(*inputs((1, 1, 1, 4, s_k), torch.float16, d=d))


@pytest.mark.skipif(INTERPRETED, reason="GPU sizes: the interpreter would take minutes")
@pytest.mark.parametrize("s", [4100, 4096], ids=["ragged", "gluon-sized"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_long_sequence_head_dim_128_against_sdpa(causal, s):
    q, k, v = inputs((1, 4, 4, s, s), torch.bfloat16, d=128)
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    assert_close(attention(q, k, v, causal=causal), expected, dtype=torch.bfloat16)
    assert DEVICE == "cuda"


@pytest.mark.skipif(GLUON is None, reason="this Triton has no Gluon for Hopper")
def test_which_problems_the_gluon_forward_takes():
    """Full attention, head size 128, both lengths positive multiples of 128; the rest goes to Triton."""
    q, k = torch.empty(1, 2, 256, 128), torch.empty(1, 1, 384, 128)
    assert GLUON.unsupported(q, k, causal=False) is None
    assert "causal" in GLUON.unsupported(q, k, causal=True)
    assert "head_dim" in GLUON.unsupported(q[..., :64], k[..., :64], causal=False)
    assert "multiples" in GLUON.unsupported(q[:, :, :200], k, causal=False)
    assert "multiples" in GLUON.unsupported(q, k[:, :, :100], causal=False)
    if not GLUON_GPU:  # here the device rule refuses it, with a reason, and path='gluon' says so
        small = inputs((1, 2, 2, 128, 128), torch.float16, d=128)
        assert fa.gluon_unsupported(*small, causal=False)
        with pytest.raises(ValueError, match="path='gluon'"):
            attention(*small, path="gluon")


@pytest.mark.skipif(not GLUON_GPU, reason="the Gluon forward runs on Hopper GPUs only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape",
    [(1, 2, 2, 128, 128), (2, 4, 1, 256, 640), (1, 8, 2, 640, 256), (1, 2, 2, 1024, 2048)],
    ids=lambda s: "B{}H{}/{}S{}x{}".format(*s),
)
def test_gluon_forward_and_backward_against_float64(shape, dtype):
    """Grouped heads, S_q ≠ S_k both ways, scores spread wide enough that the running max moves."""
    q, k, v = inputs(shape, dtype, d=128)
    q = (q * 3).requires_grad_()
    k, v = k.requires_grad_(), v.requires_grad_()
    out = attention(q, k, v, path="gluon")
    grad = random_tensor(out.shape, dtype)
    out.backward(grad)
    want = gradients64(q, k, v, grad, causal=False)
    for name, got, expected in zip(("out", "dq", "dk", "dv"), (out, q.grad, k.grad, v.grad), want):
        assert_close(got, expected, dtype=dtype, name=name)


@pytest.mark.skipif(not GLUON_GPU, reason="the Gluon forward runs on Hopper GPUs only")
def test_gluon_saves_the_log2_log_sum_exp():
    q, k, v = inputs((1, 2, 2, 256, 384), torch.bfloat16, d=128)
    o, lse = fa.flash_forward(q, k, v, False, 0.1, path="gluon")
    scores = q.double() @ k.double().transpose(-1, -2) * 0.1
    torch.testing.assert_close(lse.double(), torch.logsumexp(scores, -1) / math.log(2), atol=2e-3, rtol=0)


@pytest.mark.skipif(not GLUON_GPU, reason="the Gluon forward runs on Hopper GPUs only")
def test_auto_takes_the_gluon_forward_only_where_it_applies(monkeypatch):
    calls = []
    launch = GLUON.gluon_forward
    monkeypatch.setattr(GLUON, "gluon_forward", lambda *a: calls.append(a[0].shape) or launch(*a))
    for shape, causal in (((1, 2, 2, 256, 256), False), ((1, 2, 2, 256, 256), True), ((1, 2, 2, 200, 256), False)):
        q, k, v = inputs(shape, torch.float16, d=128)
        assert_close(
            attention(q, k, v, causal=causal),
            reference(q.double(), k.double(), v.double(), causal),
            dtype=torch.float16,
        )
    assert calls == [(1, 2, 256, 128)]


@pytest.mark.skipif(GLUON_BACKWARD is None, reason="this Triton has no Gluon for Hopper")
def test_which_problems_the_gluon_backward_takes():
    """Head size 128, S_q a positive multiple of 64 and S_k of 128, causal or not; the rest goes to Triton."""
    q, k = torch.empty(1, 2, 192, 128), torch.empty(1, 1, 384, 128)
    assert GLUON_BACKWARD.unsupported(q, k) is None
    assert "head_dim" in GLUON_BACKWARD.unsupported(q[..., :64], k[..., :64])
    for s_q, s_k in ((100, 384), (0, 384), (192, 192)):
        assert "multiple" in GLUON_BACKWARD.unsupported(q[:, :, :s_q], k[:, :, :s_k])
    if not GLUON_GPU:
        small = inputs((1, 2, 2, 128, 128), torch.float16, d=128)
        assert fa.gluon_backward_unsupported(*small, small[0])


@pytest.mark.parametrize("missing, found", [("triton.experimental.gluon", None), ("examples.flash_attention", "raise")])
def test_only_a_missing_gluon_means_no_gluon_kernel(monkeypatch, missing, found):
    """A Triton without Gluon loses the fast path; a broken module of ours raises instead of hiding."""

    def import_module(name):
        raise ImportError("missing", name=missing)

    monkeypatch.setattr(fa.importlib, "import_module", import_module)
    if found == "raise":
        with pytest.raises(ImportError):
            fa._gluon.__wrapped__("backward")
    else:
        assert fa._gluon.__wrapped__("backward") is None


def test_path_gluon_refuses_a_triton_config():
    """A config is the Triton kernels' meta-parameters: with path='gluon' it would be silently ignored."""
    q, k, v = inputs((1, 2, 2, 128, 128), torch.float16, d=128)
    with pytest.raises(ValueError, match="Triton config"):
        fa.flash_forward(q, k, v, False, 0.1, path="gluon", config=fa.FIXED_FWD_CONFIG)
    with pytest.raises(ValueError, match="Triton config"):
        fa.flash_backward(
            q, k, v, q, None, q, False, 0.1, configs=fa.backward_configs(128, False, 128, 128), path="gluon"
        )


@pytest.mark.skipif(not GLUON_GPU, reason="the Gluon backward runs on Hopper GPUs only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(
    "shape",
    [(1, 2, 2, 64, 128), (2, 4, 1, 256, 640), (1, 8, 2, 640, 256), (1, 2, 2, 1024, 1024)],
    ids=lambda s: "B{}H{}/{}S{}x{}".format(*s),
)
def test_gluon_backward_against_float64(shape, causal, dtype):
    """Grouped heads, S_q ≠ S_k both ways (causal rows that see no key when S_q > S_k), wide scores."""
    q, k, v = inputs(shape, dtype, d=128)
    q = q * 3
    scale = 128**-0.5
    o, lse = fa.flash_forward(q, k, v, causal, scale, path="tma")
    do = random_tensor(o.shape, dtype)
    got = fa.flash_backward(q, k, v, o, lse, do, causal, scale, path="gluon")
    want = gradients64(q, k, v, do, causal, scale)[1:]
    for name, g, expected in zip(("dq", "dk", "dv"), got, want):
        assert_close(g, expected, dtype=dtype, name=name)


@pytest.mark.skipif(not GLUON_GPU, reason="the Gluon backward runs on Hopper GPUs only")
def test_auto_takes_the_gluon_backward_only_where_it_applies(monkeypatch):
    calls = []
    launch = GLUON_BACKWARD.gluon_dkdv_dq
    monkeypatch.setattr(GLUON_BACKWARD, "gluon_dkdv_dq", lambda *a: calls.append(a[0].shape) or launch(*a))
    for shape, causal, d in (
        ((1, 2, 2, 192, 256), True, 128),
        ((1, 2, 2, 192, 256), False, 64),
        ((1, 2, 2, 200, 256), False, 128),
        ((1, 2, 2, 192, 200), True, 128),
    ):
        q, k, v = inputs(shape, torch.float16, d=d, requires_grad=True)
        out = attention(q, k, v, causal=causal)
        grad = random_tensor(out.shape, torch.float16)
        out.backward(grad)
        for name, got, expected in zip(
            ("dq", "dk", "dv"), (q.grad, k.grad, v.grad), gradients64(q, k, v, grad, causal)[1:]
        ):
            assert_close(got, expected, dtype=torch.float16, name=name)
    assert calls == [(1, 2, 192, 128)]


_SM90_PTX = """
import json, sys
from triton.backends.compiler import GPUTarget
from triton.compiler import compile
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

module, kernel_name, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
G = __import__(module, fromlist=["_"])
kernel = getattr(G, kernel_name)
constants = {name: getattr(G, value) if isinstance(value, str) else value
             for name, value in json.loads(sys.argv[4]).items()}
signature = {}
for name in kernel.arg_names:
    layout = gl.NVMMASharedLayout.get_default_for([rows.get(name, 0), G.HEAD_DIM], gl.bfloat16)
    signature[name] = ("constexpr" if name in constants
                       else f"tensordesc<bf16[{rows[name]}, {G.HEAD_DIM}],{layout!r}>" if name.endswith("_desc")
                       else "*fp32" if name in ("LSE", "DELTA", "DQ") else "*bf16" if name in ("DK", "DV")
                       else "fp32" if name.endswith("scale") else "i32")
source = GluonASTSource(fn=kernel, signature=signature, constexprs=constants, attrs={})
print(compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"])
"""
_GLUON_KERNELS = {  # module, kernel, rows per descriptor, constexpr arguments (a string names a module constant)
    "forward": (
        "gluon_forward",
        "attn_fwd_ws_kernel",
        dict(q_desc="BLOCK_M", o_desc="BLOCK_M", k_desc="BLOCK_N", v_desc="BLOCK_N"),
        dict(RING="STAGES"),
    ),
    "backward": (
        "gluon_backward",
        "attn_bwd_ws_kernel",
        dict(q_desc="ROWS", do_desc="ROWS", k_desc="KEYS", v_desc="KEYS"),
        dict(RING="STAGES", CAUSAL=True),
    ),
}


@pytest.mark.skipif(GLUON is None, reason="this Triton has no Gluon for Hopper")
@pytest.mark.parametrize("direction", list(_GLUON_KERNELS))
def test_gluon_register_budgets_are_what_the_module_says(direction):
    """Compiled for sm_90 without a GPU. Warp groups trade registers with setmaxnreg at run time: the
    second consumer asks for CONSUMER_REGS and the loader for LOADER_REGS, and the compiler gives the
    default partition (the first consumer, running the same code) what the workers leave of the
    registers the 384 threads hold at launch. That share must not fall below CONSUMER_REGS, or the first
    consumer spills where the second does not.

    The compile runs in a fresh process with the interpreter off: under the interpreter every jitted
    function, Gluon's own library included, is wrapped as it is defined, and the compiler cannot take it."""
    name, kernel, rows, constants = _GLUON_KERNELS[direction]
    module = fa._gluon(direction)
    rows = {arg: getattr(module, constant) for arg, constant in rows.items()}
    constants = dict(constants, CONSUMER_REGS="CONSUMER_REGS", LOADER_REGS="LOADER_REGS")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    ptx = subprocess.run(
        [
            sys.executable,
            "-c",
            _SM90_PTX,
            f"examples.flash_attention.{name}",
            kernel,
            json.dumps(rows),
            json.dumps(constants),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        cwd=ROOT,
    ).stdout
    threads = int(re.search(r"\.reqntid (\d+)", ptx).group(1))
    at_launch = int(re.search(r"\.maxnreg (\d+)", ptx).group(1))
    requested = [int(n) for n in re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)]
    assert threads == 3 * 128
    first_consumer = (3 * at_launch - module.CONSUMER_REGS - module.LOADER_REGS) // 8 * 8
    assert {module.CONSUMER_REGS, module.LOADER_REGS, min(first_consumer, 256)} <= set(requested)
    assert first_consumer >= module.CONSUMER_REGS
