"""Paged decode attention against float64 PyTorch: every stage, shuffled non-contiguous pages, lengths
of 1, exactly a page, a page + 1 and several pages, block sizes 16/32/64, GQA ratios 1/4/8, empty
sequences, forced and chosen split counts, bad inputs.

Every cache row that belongs to no sequence (free blocks, the tail of each last page) is NaN, and the
launchers' outputs and partial buffers are NaN-poisoned: a missing mask or a forgotten store fails.
Under the interpreter the kernels upcast fp16/bf16 tiles to fp32 and bf16 stores truncate; the GPU runs
the same tests with longer sequences, and a 128k one.
"""

import functools
import math

from academy import DEVICE, INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.paged_attention import kernel as pa
from examples.paged_attention import stages
from examples.paged_attention.cache import random_paged_cache
from examples.paged_attention.kernel import (
    decode_bytes,
    paged_decode_attention,
    pick_num_splits,
    reference,
    split_ranges,
)

OPS = {
    "academy": paged_decode_attention,
    "one_split": functools.partial(paged_decode_attention, num_splits=1),
    "three_splits": functools.partial(paged_decode_attention, num_splits=3),
    **stages.STAGES,
}
GROUPS = {1: (2, 2), 4: (8, 2), 8: (8, 1)}  # H / H_kv -> (H, H_kv)
LONG = 197 if INTERPRETED else 9605  # keys of the longest test sequence: many pages and tiles, a ragged end


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, pa)
    poison_allocations(monkeypatch, stages)


def problem(lengths, H, H_kv, D, page, dtype, **cache_options):
    k_cache, v_cache, table, seq_lens = random_paged_cache(lengths, H_kv, D, page, dtype, poison=True, **cache_options)
    q = random_tensor((len(lengths), H, D), dtype)
    return q, k_cache, v_cache, table, seq_lens


def expected(q, k_cache, v_cache, table, seq_lens, sm_scale=None):
    return reference(q.double(), k_cache.double(), v_cache.double(), table, seq_lens, sm_scale)


def lengths_for(page):
    """1, exactly a page, a page + 1, and a long sequence that ends inside a page."""
    return [1, page, page + 1, LONG]


@pytest.mark.parametrize("group", list(GROUPS), ids=lambda g: f"G{g}")
@pytest.mark.parametrize("page", pa.BLOCK_SIZES, ids=lambda p: f"page{p}")
@pytest.mark.parametrize("op", list(OPS))
def test_fp32_against_float64(op, page, group):
    H, H_kv = GROUPS[group]
    q, k_cache, v_cache, table, seq_lens = problem(lengths_for(page), H, H_kv, 64, page, torch.float32)
    out = OPS[op](q, k_cache, v_cache, table, seq_lens)
    assert out.shape == q.shape and out.dtype == torch.float32
    assert_close(out, expected(q, k_cache, v_cache, table, seq_lens), name=op)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_half_precision_head_dim_128(op, dtype):
    q, k_cache, v_cache, table, seq_lens = problem([1, 40, 3 * 32 + 7], 8, 2, 128, 32, dtype)
    out = OPS[op](q, k_cache, v_cache, table, seq_lens)
    assert out.dtype == dtype
    assert_close(out, expected(q, k_cache, v_cache, table, seq_lens), dtype=dtype, name=op)


@pytest.mark.parametrize("op", list(OPS))
def test_empty_sequences_return_zeros(op):
    """seq_len 0 is attention over no key: we define it as 0 (the empty sum), never NaN."""
    q, k_cache, v_cache, table, seq_lens = problem([0, 20, 0, 3], 4, 2, 64, 16, torch.float32)
    out = OPS[op](q, k_cache, v_cache, table, seq_lens)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.equal(out[2], torch.zeros_like(out[2]))
    assert_close(out, expected(q, k_cache, v_cache, table, seq_lens), name=op)


@pytest.mark.parametrize("num_splits", [1, 2, 5, 8, 16])
def test_any_split_count_gives_the_same_attention(num_splits):
    """Short sequences leave most splits empty, long ones use them all; the combine skips the empty ones
    (their partials are never written: NaN-poisoned, they would poison the result if read)."""
    page = 16
    q, k_cache, v_cache, table, seq_lens = problem([1, 33, 8 * page + 3], 4, 1, 64, page, torch.float32)
    out = paged_decode_attention(q, k_cache, v_cache, table, seq_lens, num_splits=num_splits)
    assert_close(out, expected(q, k_cache, v_cache, table, seq_lens))


def test_explicit_scale_and_max_seq_len_hint():
    q, k_cache, v_cache, table, seq_lens = problem([17, 50], 4, 4, 64, 16, torch.float32, max_blocks=40)
    for hint in (None, 50, 640):
        out = paged_decode_attention(q, k_cache, v_cache, table, seq_lens, 0.3, max_seq_len=hint)
        assert_close(out, expected(q, k_cache, v_cache, table, seq_lens, 0.3))


def test_a_wide_block_table_and_non_contiguous_inputs():
    """q a slice of a wider tensor, K and V the two halves of one (blocks, 2, page, H_kv, D) cache
    (the strides of a combined KV cache), a block table sliced out of a wider one."""
    page, H_kv, D = 32, 2, 64
    lengths = [70, 5, 129]
    k_cache, v_cache, table, seq_lens = random_paged_cache(lengths, H_kv, D, page, torch.float32, max_blocks=9)
    kv = torch.stack([k_cache, v_cache], dim=1)
    k_view, v_view = kv[:, 0], kv[:, 1]
    wide_table = torch.cat([table, table], dim=1)[:, :9]
    q = random_tensor((3, 4, D + 32))[:, :, :D]
    assert not (q.is_contiguous() or k_view.is_contiguous() or wide_table.is_contiguous())
    for name, op in OPS.items():
        out = op(q, k_view, v_view, wide_table, seq_lens)
        assert_close(out, expected(q, k_cache, v_cache, table, seq_lens), name=name)


def test_grouped_heads_equal_repeated_heads():
    q, k_cache, v_cache, table, seq_lens = problem([30, 65], 8, 2, 64, 16, torch.float32)
    repeated = [c.repeat_interleave(4, dim=2) for c in (k_cache, v_cache)]
    assert_close(
        paged_decode_attention(q, k_cache, v_cache, table, seq_lens),
        paged_decode_attention(q, *repeated, table, seq_lens).double(),
    )


def test_the_split_rule():
    """Shapes only: a full GPU gets 1 split, a small batch of long sequences fills the SMs, the longest
    possible sequence is cut into pieces of at most MAX_SPLIT_TOKENS, never more than it can use."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pa, "sm_count", lambda: 132)
        assert pick_num_splits(64, 8, 512, 256) == 1  # 512 programs: the GPU is full
        assert pick_num_splits(8, 8, 32768, 256) == 8  # 64 pairs: 8 splits fill 132 SMs ~4 deep
        assert pick_num_splits(16, 8, 131072, 256) == 32  # 128k: at most 4096 keys a program
        assert pick_num_splits(1, 8, 300, 256) == 2  # 300 keys hold only two splits of 256
        assert pick_num_splits(1, 1, 10**7, 256) == pa.MAX_SPLITS
        assert pick_num_splits(4, 8, 0, 256) == 1


@pytest.mark.parametrize("seq_len", [0, 1, 31, 32, 33, 100, 1000, 4097])
@pytest.mark.parametrize("num_splits", [1, 3, 7, 64])
def test_split_ranges_partition_the_keys(seq_len, num_splits):
    ranges = split_ranges(seq_len, num_splits, 64, 32)
    assert len(ranges) <= num_splits
    assert [t for lo, hi in ranges for t in range(lo, hi)] == list(range(seq_len))
    assert all(lo % 32 == 0 for lo, _ in ranges)  # whole tiles: only a split's last tile is ragged
    assert all(hi - lo >= 64 for lo, hi in ranges[:-1])


def test_debug_checks_the_callers_contract():
    q, k_cache, v_cache, table, seq_lens = problem([5, 40], 2, 2, 64, 16, torch.float32)
    paged_decode_attention(q, k_cache, v_cache, table, seq_lens, debug=True)
    bad = table.clone()
    bad[1, 2] = k_cache.shape[0]  # the last page of sequence 1 is not a block
    with pytest.raises(ValueError, match="outside"):
        paged_decode_attention(q, k_cache, v_cache, bad, seq_lens, debug=True)
    with pytest.raises(ValueError, match="seq_lens must lie"):
        paged_decode_attention(q, k_cache, v_cache, table, seq_lens + 100, debug=True)


def test_bytes_model():
    assert decode_bytes([3, 5], 8, 2, 64, 2) == (8 * 2 * 2 + 2 * 8 * 2) * 64 * 2
    assert decode_bytes(torch.tensor([7]), 1, 1, 128, 4) == (7 * 2 + 2) * 128 * 4


def test_bad_inputs():
    q, k_cache, v_cache, table, seq_lens = problem([5, 9], 4, 2, 64, 16, torch.float32)
    call = functools.partial(paged_decode_attention, q, k_cache, v_cache, table, seq_lens)
    with pytest.raises(TypeError, match="dtype"):
        paged_decode_attention(q.double(), k_cache.double(), v_cache.double(), table, seq_lens)
    with pytest.raises(TypeError, match="dtypes differ"):
        paged_decode_attention(q.half(), k_cache, v_cache, table, seq_lens)
    with pytest.raises(TypeError, match="int32"):
        paged_decode_attention(q, k_cache, v_cache, table.long(), seq_lens)
    with pytest.raises(TypeError, match="int32"):
        paged_decode_attention(q, k_cache, v_cache, table, seq_lens.long())
    with pytest.raises(ValueError, match="3-D"):
        paged_decode_attention(q[:, :, None], k_cache, v_cache, table, seq_lens)
    with pytest.raises(ValueError, match="4-D"):
        paged_decode_attention(q, k_cache[0], v_cache[0], table, seq_lens)
    with pytest.raises(ValueError, match="one shape"):
        paged_decode_attention(q, k_cache, v_cache[:-1], table, seq_lens)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        paged_decode_attention(q[..., :32], k_cache[..., :32], v_cache[..., :32], table, seq_lens)
    with pytest.raises(ValueError, match="block_size"):
        paged_decode_attention(q, k_cache[:, :8], v_cache[:, :8], table, seq_lens)
    with pytest.raises(ValueError, match="multiple of the 2"):
        paged_decode_attention(q[:, :3], k_cache, v_cache, table, seq_lens)
    with pytest.raises(ValueError, match="block_table must be"):
        paged_decode_attention(q, k_cache, v_cache, table[:1], seq_lens)
    with pytest.raises(ValueError, match="seq_lens must be"):
        paged_decode_attention(q, k_cache, v_cache, table, seq_lens[:1])
    with pytest.raises(ValueError, match="contiguous along head_dim"):
        paged_decode_attention(q.transpose(1, 2).contiguous().transpose(1, 2), k_cache, v_cache, table, seq_lens)
    with pytest.raises(ValueError, match="sm_scale"):
        call(sm_scale=-1.0)
    with pytest.raises(ValueError, match="num_splits"):
        call(num_splits=0)
    with pytest.raises(ValueError, match="max_seq_len"):
        call(max_seq_len=-1)
    if DEVICE == "cuda":
        with pytest.raises(ValueError, match="on cpu"):
            paged_decode_attention(q, k_cache, v_cache, table.cpu(), seq_lens)


@pytest.mark.parametrize("op", list(OPS))
def test_inputs_that_require_grad_are_refused_unless_under_no_grad(op):
    q, k_cache, v_cache, table, seq_lens = problem([5, 9], 2, 2, 64, 16, torch.float32)
    q.requires_grad_()
    with pytest.raises(ValueError, match="inference only"):
        OPS[op](q, k_cache, v_cache, table, seq_lens)
    with torch.no_grad():
        out = OPS[op](q, k_cache, v_cache, table, seq_lens)
    assert_close(out, expected(q.detach(), k_cache, v_cache, table, seq_lens))


def test_empty_batch():
    q, k_cache, v_cache, table, seq_lens = problem([], 4, 2, 64, 16, torch.float32)
    for op in OPS.values():
        assert op(q, k_cache, v_cache, table, seq_lens).shape == (0, 4, 64)


# ------------------------------------------------------------------------------------------- GPU only

gpu = pytest.mark.skipif(INTERPRETED, reason="long sequences and CUDA graphs need a GPU")


@gpu
@pytest.mark.parametrize("page", pa.BLOCK_SIZES)
@pytest.mark.parametrize("op", list(OPS))
def test_gpu_mixed_lengths_bf16(op, page):
    """A batch mixing 1 to 20k keys, Llama-3.1-8B's heads (32 / 8, D = 128)."""
    lengths = [1, page, page + 1, 300, 4097, 20000, 777, 2]
    q, k_cache, v_cache, table, seq_lens = problem(lengths, 32, 8, 128, page, torch.bfloat16)
    out = OPS[op](q, k_cache, v_cache, table, seq_lens)
    assert_close(out, expected(q, k_cache, v_cache, table, seq_lens), dtype=torch.bfloat16, name=op)


@gpu
@pytest.mark.parametrize("op", list(OPS))
def test_gpu_one_128k_sequence_among_short_ones(op):
    lengths = [131072, 3, 1000, 64]
    q, k_cache, v_cache, table, seq_lens = problem(lengths, 8, 1, 64, 64, torch.float16)
    out = OPS[op](q, k_cache, v_cache, table, seq_lens)
    assert_close(out, expected(q, k_cache, v_cache, table, seq_lens), dtype=torch.float16, name=op)


@gpu
def test_gpu_no_host_sync_and_graph_replay_follows_new_lengths():
    """The launcher never reads seq_lens on the host: it runs under sync debug mode "error", and a CUDA
    graph captured once gives the right answer after the lengths change in place (a decode step)."""
    # The cache holds finite keys up to the longest lengths of the replays below (the rows past a
    # sequence's length are NaN), so each replay reads rows that exist and must mask the rest.
    q, k_cache, v_cache, table, seq_lens = problem([101, 3000, 3008], 16, 4, 128, 16, torch.bfloat16)
    seq_lens.copy_(torch.tensor([100, 3000, 1], dtype=torch.int32))
    for op in OPS.values():
        op(q, k_cache, v_cache, table, seq_lens)  # compile outside the checks
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for op in OPS.values():
            op(q, k_cache, v_cache, table, seq_lens)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    paged_decode_attention(q, k_cache, v_cache, table, seq_lens, max_seq_len=3008)  # the captured call's kernels
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = paged_decode_attention(q, k_cache, v_cache, table, seq_lens, max_seq_len=3008)
    for lengths in ([100, 3000, 1], [101, 7, 3008]):
        seq_lens.copy_(torch.tensor(lengths, dtype=torch.int32))
        graph.replay()
        assert_close(out, expected(q, k_cache, v_cache, table, seq_lens), dtype=torch.bfloat16)


def test_reference_is_attention_over_the_gathered_sequence():
    """The reference itself, against PyTorch's SDPA on one sequence's keys gathered by hand."""
    q, k_cache, v_cache, table, seq_lens = problem([37], 4, 2, 64, 16, torch.float32)
    pages = table[0, :3].long()
    k = k_cache[pages].reshape(48, 2, 64)[:37].double().permute(1, 0, 2)  # (H_kv, L, D)
    v = v_cache[pages].reshape(48, 2, 64)[:37].double().permute(1, 0, 2)
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q[0].double().view(2, 2, 64), k, v, scale=1 / math.sqrt(64)
    )  # the two query heads of each group as two query rows
    assert_close(expected(q, k_cache, v_cache, table, seq_lens)[0], sdpa.reshape(4, 64), tol=1e-12)
