"""The forward's and backward's fixed config tables: every problem finds a valid entry, the lookup
takes the bucket of the longer sequence, every forward tile fits Hopper's shared memory, each head
size goes to the kernel and tile pinned below, an explicit config overrides the table (for the fused
backward and the split one), and (on a GPU) every entry computes the right attention."""

import json
import os
import subprocess
import sys

from academy import INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.flash_attention import kernel as fa

BUCKETS = ("short", "medium", "long")
FWD_KEYS = {"BLOCK_M", "BLOCK_N", "WARP_SPECIALIZE", "num_warps", "num_stages"}
BWD_KEYS = {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"}
LENGTH_OF = {"short": 300, "medium": 1500, "long": 4200}  # one length inside each bucket
KIB = 1024
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLUON, GLUON_BACKWARD = fa._gluon("forward"), fa._gluon("backward")


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


def test_every_forward_tile_fits_hoppers_shared_memory():
    """Q plus one K and one V tile per stage, fp16/bf16, within the 227 KiB a program may take of an SM's 228."""
    assert fa.SHARED_MEMORY_PER_PROGRAM == 227 * KIB
    for (d, causal), buckets in fa.FWD_TABLE.items():
        for bucket, config in buckets.items():
            assert fa.forward_shared_bytes(d, config) <= fa.SHARED_MEMORY_PER_PROGRAM, (d, causal, bucket, config)
    # the arithmetic the D = 256 comment writes out: a 512-byte row, 2 stages, and why not 3
    assert fa.forward_shared_bytes(256, fa._fwd(64, 64, 4, 2)) == 160 * KIB
    assert fa.forward_shared_bytes(256, fa._fwd(128, 64, 8, 2)) == 192 * KIB
    assert fa.forward_shared_bytes(256, fa._fwd(128, 64, 8, 3)) == 256 * KIB > fa.SHARED_MEMORY_PER_PROGRAM
    assert fa.forward_shared_bytes(128, fa._fwd(64, 64, 4, 3)) == 112 * KIB  # two programs to an SM


# Which tile each head size gets, by sequence bucket, on a GPU: (BLOCK_M, BLOCK_N, warps, stages).
D256_FORWARD = {"short": (64, 64, 4, 2), "medium": (128, 64, 8, 2), "long": (128, 64, 8, 2)}
D256_BACKWARD = ((64, 64, 8, 2), (128, 64, 8, 1))  # (dK/dV, dQ): always the split form


def _tile(config: dict) -> tuple[int, int, int, int]:
    return config["BLOCK_M"], config["BLOCK_N"], config["num_warps"], config["num_stages"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_head_dim_256_gets_its_pinned_tiles(monkeypatch, causal):
    monkeypatch.setattr(fa, "INTERPRETED", False)
    for bucket, s in LENGTH_OF.items():
        for s_q, s_k in ((s, s), (1, s), (s, 7)):  # the bucket of the longer sequence
            forward = fa.forward_config(256, causal, s_q, s_k)
            assert _tile(forward) == D256_FORWARD[bucket] and not forward["WARP_SPECIALIZE"]
            kv, q = fa.backward_configs(256, causal, s_q, s_k)
            assert q is not None, "D = 256 runs the split backward: no fused dQ atomics"
            assert (_tile(kv), _tile(q)) == D256_BACKWARD
    for d in (64, 128):  # the narrower heads keep their swept backward table
        assert fa.backward_configs(d, causal, 4200, 4200) == fa.BWD_TABLE[causal, "long"]


@pytest.mark.skipif(GLUON is None or GLUON_BACKWARD is None, reason="this Triton has no Gluon for Hopper")
@pytest.mark.parametrize("d", fa.HEAD_DIMS)
def test_only_head_dim_128_goes_to_the_gluon_kernels(d):
    """At a problem the Gluon kernels' other rules accept (full attention, lengths multiples of 128)."""
    q, k = torch.empty(1, 2, 256, d), torch.empty(1, 1, 384, d)
    forward, backward = GLUON.unsupported(q, k, causal=False), GLUON_BACKWARD.unsupported(q, k)
    if d == 128:
        assert forward is None and backward is None
    else:
        assert f"got {d}" in forward and f"got {d}" in backward


@pytest.mark.skipif(GLUON is None or GLUON_BACKWARD is None, reason="this Triton has no Gluon for Hopper")
def test_auto_runs_the_triton_kernels_at_head_dim_256_even_where_gluon_runs(monkeypatch):
    """As on a Hopper GPU (the device rules waved through): 'auto' falls back on the head size alone, and
    'gluon' says why it cannot. The Gluon launchers fail the test if they are reached."""
    monkeypatch.setattr(fa, "_gluon_unsupported", lambda *tensors: None)

    def not_here(*args):
        raise AssertionError("a Gluon kernel was launched at D = 256")

    monkeypatch.setattr(GLUON, "gluon_forward", not_here)
    monkeypatch.setattr(GLUON_BACKWARD, "gluon_dkdv_dq", not_here)
    q, k, v = (random_tensor((1, 2, 128, 256), torch.float16, requires_grad=True) for _ in range(3))
    assert "head_dim" in fa.gluon_unsupported(q, k, v, False)
    assert "head_dim" in fa.gluon_backward_unsupported(q, k, v, q)
    with pytest.raises(ValueError, match="path='gluon' cannot take this problem: head_dim"):
        fa.attention(q, k, v, path="gluon")
    out = fa.attention(q, k, v)
    grad = random_tensor(tuple(out.shape), torch.float16)
    out.backward(grad)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    want = fa.reference(q64, k64, v64)
    want.backward(grad.double())
    for name, got, ref in zip(
        ("o", "dq", "dk", "dv"), (out, q.grad, k.grad, v.grad), (want, q64.grad, k64.grad, v64.grad)
    ):
        assert_close(got, ref, dtype=torch.float16, name=name)


_SM90_SHARED = """
import json, sys
import torch
torch.cuda.is_available = lambda: True  # academy then leaves the interpreter off: compile only, never launch
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from examples.flash_attention import kernel as fa

def shared(kernel, constants, types, config):
    signature = {n: "constexpr" if n in constants else types.get(n, "i32") for n in kernel.arg_names}
    source = ASTSource(fn=kernel, signature=signature, constexprs=constants, attrs={})
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    return compile(source, target=GPUTarget("cuda", 90, 32), options=options).metadata.shared

d, out = 256, {}
for config in {json.dumps(c, sort_keys=True): c for c in fa.FWD_TABLE[d, True].values()}.values():
    bm, bn = config["BLOCK_M"], config["BLOCK_N"]
    types = {n: f"tensordesc<bf16[1,{r},{d}]>" for n, r in (("Q", bm), ("O", bm), ("K", bn), ("V", bn))}
    types.update(sm_scale="fp32", LSE="*fp32")
    meta = {k: v for k, v in config.items() if k.isupper()}
    constants = dict(meta, HEAD_DIM=d, CAUSAL=True, USE_TMA=True, UPCAST=False)
    compiled = shared(fa.attn_fwd_kernel, constants, types, config)
    out[f"forward {bm}x{bn}"] = (compiled, fa.forward_shared_bytes(d, config))
kv, q = fa.D256_BWD
types = {n: "*bf16" for n in ("Q", "K", "V", "DO", "DK", "DV", "DQ")}
types.update(sm_scale="fp32", LSE="*fp32", DELTA="*fp32")
common = dict(HEAD_DIM=d, CAUSAL=True, UPCAST=False)
dkdv = dict(common, BLOCK_M=kv["BLOCK_M"], BLOCK_N=kv["BLOCK_N"], FUSE_DQ=False, DQ_TMA=False, ROTATE=False)
out["dK/dV"] = (shared(fa.attn_bwd_dkdv_kernel, dkdv, types, kv), None)
out["dQ"] = (shared(fa.attn_bwd_dq_kernel, dict(common, BLOCK_M=q["BLOCK_M"], BLOCK_N=q["BLOCK_N"]), types, q), None)
print(json.dumps(out))
"""


def test_head_dim_256_tiles_compile_within_hoppers_shared_memory():
    """Compiled for sm_90 without a GPU, in a fresh process with the interpreter off (under it, kernels are
    wrapped as they are defined and the compiler cannot take them): each D = 256 kernel's shared memory
    fits a program's 227 KiB, and the forward's is the arithmetic above plus at most 2 KiB of barriers."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run(
        [sys.executable, "-c", _SM90_SHARED], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for name, (shared, tiles) in json.loads(run.stdout.splitlines()[-1]).items():
        assert shared <= fa.SHARED_MEMORY_PER_PROGRAM, f"{name}: {shared} bytes of shared memory"
        if tiles is not None:
            assert tiles <= shared <= tiles + 2 * KIB, f"{name}: {shared} bytes compiled, {tiles} by the arithmetic"


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
