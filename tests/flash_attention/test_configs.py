"""The forward's and backward's fixed config tables: every problem finds a valid entry, the lookup
takes the bucket of the longer sequence, every forward tile fits Hopper's shared memory, each head
size goes to the kernel and tile pinned below, an explicit config overrides the table (for the fused
backward and the split one), and (on a GPU) every entry computes the right attention."""

from academy import INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.flash_attention import kernel as fa

BUCKETS = ("short", "medium", "long")
FWD_KEYS = {"BLOCK_M", "BLOCK_N", "WARP_SPECIALIZE", "num_warps", "num_stages"}
BWD_KEYS = {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"}
LENGTH_OF = {"short": 300, "medium": 1500, "long": 4200}  # one length inside each bucket


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, fa)


def _valid(config: dict, keys: set[str]) -> None:
    assert set(config) == keys
    for block in ("BLOCK_M", "BLOCK_N"):
        assert config[block] >= 16 and config[block] & (config[block] - 1) == 0, config
    assert config["num_warps"] in (4, 8) and 1 <= config["num_stages"] <= 4, config


@pytest.mark.parametrize(
    "s, bucket", [(1, "short"), (1024, "short"), (1025, "medium"), (4096, "medium"), (4097, "long"), (16384, "long")]
)
def test_bucket_is_that_of_the_longer_sequence(s, bucket):
    assert fa.sequence_bucket(s, 1) == bucket == fa.sequence_bucket(1, s)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", fa.HEAD_DIMS)
def test_table_has_a_valid_entry_for_every_problem(monkeypatch, d, causal):
    monkeypatch.setattr(fa, "INTERPRETED", False)  # the GPU's tables, on any machine
    assert set(fa.FWD_TABLE[d, causal]) == set(BUCKETS)
    for bucket, s in LENGTH_OF.items():
        forward = fa.forward_config(d, causal, s, s)
        assert forward is fa.FWD_TABLE[d, causal][bucket]
        _valid(forward, FWD_KEYS)
        kv, q = fa.backward_configs(d, causal, s, s)
        assert (kv, q) == (fa.BWD_TABLE[causal, bucket] if d <= 128 else fa.D256_BWD)
        _valid(kv, BWD_KEYS)
        if q is not None:  # None: the fused backward, no dQ kernel
            _valid(q, BWD_KEYS)
    monkeypatch.setattr(fa, "INTERPRETED", True)
    assert fa.forward_config(d, causal, 4200, 4200) == fa.INTERPRETER_FWD
    assert fa.backward_configs(d, causal, 4200, 4200) == fa.INTERPRETER_BWD


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "split"])
def test_an_explicit_config_overrides_the_table(monkeypatch, fused):
    def no_lookup(*args):
        raise AssertionError("the table was consulted despite an explicit config")

    monkeypatch.setattr(fa, "forward_config", no_lookup)
    monkeypatch.setattr(fa, "backward_configs", no_lookup)
    bm, bn, stages = (16, 32, 1) if INTERPRETED else (64, 64, 2)  # neither table's entry for these lengths
    bwd = dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=4, num_stages=stages)
    fwd = dict(bwd, WARP_SPECIALIZE=False)
    q, k, v = (random_tensor((1, 2, s, 64), torch.float16) for s in (37, 45, 45))
    scale = 0.125
    o, lse = fa.flash_forward(q, k, v, True, scale, config=fwd)
    do = random_tensor(tuple(o.shape), torch.float16)
    dq, dk, dv = fa.flash_backward(q, k, v, o, lse, do, True, scale, configs=(bwd, None if fused else bwd))
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    out = fa.reference(q64, k64, v64, True, scale)
    out.backward(do.double())
    for name, got, want in zip(("o", "dq", "dk", "dv"), (o, dq, dk, dv), (out, q64.grad, k64.grad, v64.grad)):
        assert_close(got, want, dtype=torch.float16, name=name)


@pytest.mark.skipif(INTERPRETED, reason="GPU sizes and the GPU's tables: the interpreter uses one 16×16 config")
@pytest.mark.parametrize("bucket", BUCKETS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", fa.HEAD_DIMS)
def test_every_table_entry_computes_attention(d, causal, bucket):
    s = LENGTH_OF[bucket]
    q, k, v = (random_tensor((1, 2, s, d), torch.bfloat16, requires_grad=True) for _ in range(3))
    out = fa.attention(q, k, v, causal=causal)
    grad = random_tensor(tuple(out.shape), torch.bfloat16)
    out.backward(grad)
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    want = fa.reference(q32, k32, v32, causal)
    want.backward(grad.float())
    expected = (want, q32.grad, k32.grad, v32.grad)
    for name, got, ref in zip(("o", "dq", "dk", "dv"), (out, q.grad, k.grad, v.grad), expected):
        assert_close(got, ref, dtype=torch.bfloat16, name=f"{bucket} {name}")
