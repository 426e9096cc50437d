"""Cross entropy: loss and gradient against PyTorch in float64, for every option combination.

Under the interpreter each program (one row) costs ~0.5 ms per chunk, so the
row counts stay small; rows wider than one chunk (``MAX_BLOCK_V``) are tested
with a handful of rows. The T·V > 2**31 test runs on a GPU only.
"""

import itertools
import math

from academy import DEVICE, INTERPRETED
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import numpy as np
import pytest
import torch

from examples.cross_entropy import kernel as ce_module
from examples.cross_entropy.kernel import MAX_BLOCK_V, cross_entropy, reference


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, ce_module)


def make_case(n_rows, n_cols, dtype=torch.float32, n_ignored=1, scale=2.0):
    logits = random_tensor((n_rows, n_cols), dtype, scale=scale)
    target = torch.randint(0, n_cols, (n_rows,), device=DEVICE)
    target[torch.randperm(n_rows, device=DEVICE)[:n_ignored]] = -100
    return logits, target


def expected(logits, target, grad_output=None, **options):
    """Loss and gradient of the float64 reference."""
    x64 = logits.detach().double().requires_grad_()
    loss = reference(x64, target, **options)
    go = torch.ones_like(loss) if grad_output is None else grad_output.double()
    loss.backward(go)
    return loss.detach(), x64.grad


def ours(logits, target, grad_output=None, **options):
    x = logits.detach().clone().requires_grad_()
    loss = cross_entropy(x, target, **options)
    loss.backward(torch.ones_like(loss) if grad_output is None else grad_output)
    return loss.detach(), x.grad


def check_loss_and_gradient(logits, target, grad_in_logits=False, **options):
    """Loss and d(loss)/d(logits) (in place or not) against the float64 reference."""
    loss_ref, grad_ref = expected(logits, target, **options)
    x = logits.clone().requires_grad_()
    loss = cross_entropy(x, target, grad_in_logits=grad_in_logits, **options)
    loss.backward()
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(x.grad, grad_ref, dtype=torch.float32, name="dlogits" + " written in place" * grad_in_logits)


def spy_on_split_kernel(monkeypatch) -> list[int]:
    """The row count of every split-row launch, recorded as the launches happen."""
    calls = []
    launch_split = ce_module._launch_split
    monkeypatch.setattr(
        ce_module,
        "_launch_split",
        lambda *args, **kwargs: calls.append(args[0].shape[0]) or launch_split(*args, **kwargs),
    )
    return calls


OPTIONS = [
    dict(reduction=r, label_smoothing=e, softcap=c, logit_scale=s)
    for r, e, c, s in itertools.product(("mean", "sum", "none"), (0.0, 0.1), (None, 3.0), (None, 0.7))
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_every_option_combination_fp32(options):
    logits, target = make_case(9, 1000, n_ignored=2)  # 1000: not a power of two, one partly masked chunk
    grad_output = random_tensor(9) if options["reduction"] == "none" else torch.tensor(0.37)
    loss, grad = ours(logits, target, grad_output, **options)
    loss_ref, grad_ref = expected(logits, target, grad_output, **options)
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(grad, grad_ref, dtype=torch.float32, name="dlogits")


@pytest.mark.parametrize("n_cols", [2, 7, 127, 3001, MAX_BLOCK_V + 907])
def test_vocabularies_not_powers_of_two_with_softcap(n_cols):
    """Padded lanes must stay -inf after the softcap (the seed's kernel made them -t)."""
    logits, target = make_case(4, n_cols)
    options = dict(softcap=2.5, label_smoothing=0.05)
    loss, grad = ours(logits, target, **options)
    loss_ref, grad_ref = expected(logits, target, **options)
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(grad, grad_ref, dtype=torch.float32, name="dlogits")


@pytest.mark.parametrize("per_lane", [True, False], ids=["max-per-lane", "max-per-chunk"])
def test_wide_rows_large_logits_online_lse(per_lane, monkeypatch):
    """Several chunks per row and logits near fp32's exp overflow: the online max must rescale.
    Both flavours of sweep 1 (the tuning sweep picks one) are checked."""
    monkeypatch.setattr(ce_module, "PER_LANE", per_lane)
    logits, target = make_case(3, 3 * MAX_BLOCK_V + 5, scale=60.0)
    logits[0, -1] = 300.0  # the maximum in the last chunk
    options = dict(reduction="none", label_smoothing=0.1)
    go = random_tensor(3)
    loss, grad = ours(logits, target, go, **options)
    loss_ref, grad_ref = expected(logits, target, go, **options)
    # At logits near 300, fp32 rounds z − lse by up to 2⁻²⁴·300 ≈ 2·10⁻⁵, so each p_j is that far off
    # relatively whoever computes it: the bar is also twice PyTorch's own fp32 error on the same input.
    x32 = logits.detach().clone().requires_grad_()
    reference(x32, target, **options).backward(go)
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(grad, grad_ref, dtype=torch.float32, baseline=x32.grad, name="dlogits")


@pytest.mark.parametrize(
    "knobs",
    [
        dict(SPLIT_ROWS=False, PROGRAMS_PER_SM=1, PER_LANE=True),
        dict(SPLIT_ROWS=False, PROGRAMS_PER_SM=2, KEEP="evict_last", STREAM="evict_first", PER_LANE=False),
        dict(SPLIT_ROWS=False, PROGRAMS_PER_SM=0),
        dict(SPLIT_ROWS=True, SPLIT_BLOCK_V=4096, SPLIT_PROGRAMS_PER_SM=1, LOAD_HINT="", STORE_HINT="", PREFETCH=False),
        dict(SPLIT_ROWS=True, SPLIT_BLOCK_V=MAX_BLOCK_V, SPLIT_WARPS=32),
    ],
    ids=[
        "two-sweeps-persistent-max-per-lane",
        "two-sweeps-hints-chunk-max",
        "two-sweeps-row-per-program",
        "split-rows-5-chunks",
        "split-rows-2-chunks",
    ],
)
def test_tuning_knobs_keep_results_exact(knobs, monkeypatch):
    """Every variant the tuning sweep may pick computes the same thing (persistent grids
    give each program several rows: 11 rows on a grid of 4 or 8 programs here; the
    split-row kernel cuts each row into chunks on separate programs)."""
    for name, value in knobs.items():
        monkeypatch.setattr(ce_module, name, value)
    logits, target = make_case(11, MAX_BLOCK_V + 300, n_ignored=3)
    options = dict(label_smoothing=0.1, softcap=20.0)
    loss, grad = ours(logits, target, torch.tensor(0.5), **options)
    loss_ref, grad_ref = expected(logits, target, torch.tensor(0.5), **options)
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(grad, grad_ref, dtype=torch.float32, name="dlogits")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_dtypes(dtype):
    logits, target = make_case(8, 1500, dtype)
    loss, grad = ours(logits, target, softcap=5.0)
    loss_ref, grad_ref = expected(logits, target, softcap=5.0)
    assert loss.dtype == dtype and grad.dtype == dtype
    _, torch_grad = expected(logits.float(), target, softcap=5.0)  # PyTorch's own rounding to dtype
    assert_close(loss, loss_ref, dtype=dtype, name="loss")
    assert_close(grad, grad_ref, dtype=dtype, baseline=torch_grad.to(dtype), name="dlogits")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_all_rows_ignored_matches_pytorch(reduction):
    logits, target = make_case(5, 300, n_ignored=5)
    loss, grad = ours(logits, target, reduction=reduction, label_smoothing=0.2)
    loss_ref, grad_ref = expected(logits, target, reduction=reduction, label_smoothing=0.2)
    if reduction == "mean":
        assert math.isnan(loss.item()) and math.isnan(loss_ref.item())  # 0/0, as PyTorch defines it
    else:
        assert torch.equal(loss.double(), loss_ref)
    assert torch.equal(grad.double(), grad_ref) and not grad.any()


def test_grad_output_one_is_the_unscaled_gradient():
    logits, target = make_case(6, 700)
    loss, grad = ours(logits, target)  # backward(1.0): the scaling kernel returns at once
    _, grad_ref = expected(logits, target)
    assert_close(grad, grad_ref, dtype=torch.float32)


@pytest.mark.parametrize("per_row", [False, True], ids=["one-g", "g-per-row"])
def test_scaling_grid_walks_every_tile(per_row):
    """The scaling kernel's grid is capped at a few programs per SM: with more tiles than programs,
    each program must scale several, and every tile exactly once."""
    n_rows, n_cols = ce_module.SCALE_PROGRAMS_PER_SM * ce_module.sm_count() // 4 + 5, 3 * ce_module.SCALE_BLOCK + 11
    g = random_tensor((n_rows, n_cols))
    go = random_tensor(n_rows) if per_row else torch.tensor(0.37, device=g.device)
    expected_g = g * (go[:, None] if per_row else go)
    ce_module.scale_by_grad_output(g, go)
    assert_close(g, expected_g, dtype=torch.float32, name="scaled gradient")


def test_gradient_in_logits_only_when_asked():
    logits, target = make_case(6, 900)
    _, grad_ref = expected(logits, target, grad_output=torch.tensor(2.0))
    x = logits.clone().requires_grad_()
    cross_entropy(x, target).backward(torch.tensor(2.0))
    assert torch.equal(x.detach(), logits), "the default must leave the caller's logits untouched"

    x = logits.clone().requires_grad_()
    loss = cross_entropy(x, target, grad_in_logits=True)
    assert_close(loss, reference(logits, target), dtype=torch.float32)
    assert not torch.equal(x.detach(), logits), "grad_in_logits=True overwrites the logits"
    loss.backward(torch.tensor(2.0))
    assert_close(x.grad, grad_ref, dtype=torch.float32, name="dlogits written in place")


def test_gradient_in_logits_with_rows_split_across_programs(monkeypatch):
    """In place with a row in several chunks: the target's logit must be read before another
    program of the row overwrites it with its gradient (SPLIT_ROWS is off by default: set it)."""
    monkeypatch.setattr(ce_module, "SPLIT_ROWS", True)
    monkeypatch.setattr(ce_module, "SPLIT_BLOCK_V", 256)
    calls = spy_on_split_kernel(monkeypatch)
    logits, target = make_case(5, 1000, n_ignored=1)
    target[0] = 999  # in the last, partly masked chunk
    check_loss_and_gradient(logits, target, grad_in_logits=True, label_smoothing=0.1, softcap=4.0)
    assert calls, "the split-row kernel was not used"


def test_no_grad_path_and_strided_logits():
    wide = random_tensor((7, 1300))
    logits = wide[:, 100:1200]  # row stride 1300, unit column stride: used as is
    target = torch.randint(0, 1100, (7,), device=DEVICE)
    with torch.no_grad():
        assert_close(cross_entropy(logits, target, reduction="none"), reference(logits, target, reduction="none"))
    transposed = random_tensor((600, 5)).t()  # column stride 5: copied
    target = torch.randint(0, 600, (5,), device=DEVICE)
    loss, grad = ours(transposed, target)
    loss_ref, grad_ref = expected(transposed, target)
    assert_close(loss, loss_ref, dtype=torch.float32)
    assert_close(grad, grad_ref, dtype=torch.float32)
    every_other = torch.randint(0, 600, (10,), device=DEVICE)[::2]  # a strided target: copied, not misread
    loss, grad = ours(transposed, every_other)
    loss_ref, grad_ref = expected(transposed, every_other)
    assert_close(loss, loss_ref, dtype=torch.float32)
    assert_close(grad, grad_ref, dtype=torch.float32)


def test_batch_sequence_vocabulary_layout():
    logits, target = make_case(12, 300, n_ignored=3)
    logits3, target3 = logits.view(3, 4, 300), target.view(3, 4)
    for reduction in ("mean", "none"):
        go = random_tensor((3, 4)) if reduction == "none" else None
        loss, grad = ours(logits3, target3, go, reduction=reduction)
        loss_ref, grad_ref = expected(logits3, target3, go, reduction=reduction)
        assert loss.shape == loss_ref.shape and grad.shape == (3, 4, 300)
        assert_close(loss, loss_ref, dtype=torch.float32)
        assert_close(grad, grad_ref, dtype=torch.float32)


def test_empty_batch_like_pytorch():
    logits, target = random_tensor((0, 10)), torch.zeros(0, dtype=torch.int64, device=DEVICE)
    assert math.isnan(cross_entropy(logits, target).item())
    assert cross_entropy(logits, target, reduction="sum").item() == 0
    assert cross_entropy(logits, target, reduction="none").shape == (0,)


def test_out_of_range_target_is_nan_not_a_wild_read():
    logits, target = make_case(3, 50, n_ignored=0)
    target[1] = 50
    losses = cross_entropy(logits, target, reduction="none")
    assert math.isnan(losses[1].item()) and torch.isfinite(losses[[0, 2]]).all()


def test_backward_twice_is_refused():
    logits, target = make_case(3, 40)
    x = logits.requires_grad_()
    loss = cross_entropy(x, target)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="only once"):
        loss.backward()


def test_rejects_bad_input():
    logits, target = make_case(4, 10)
    with pytest.raises(TypeError, match="torch.Tensor"):
        cross_entropy(logits.tolist(), target)
    with pytest.raises(TypeError, match="dtype"):
        cross_entropy(logits.double(), target)
    with pytest.raises(TypeError, match="dtype"):
        cross_entropy(logits, target.int())
    with pytest.raises(ValueError, match="target must have shape"):
        cross_entropy(logits[None], target)
    with pytest.raises(ValueError, match="tokens, vocabulary"):
        cross_entropy(logits[0], target[0])
    with pytest.raises(ValueError, match="target must have shape"):
        cross_entropy(logits, target[:3])
    with pytest.raises(ValueError, match="empty vocabulary"):
        cross_entropy(logits[:, :0], target)
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy(logits, target, reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        cross_entropy(logits, target, label_smoothing=1.5)
    with pytest.raises(ValueError, match="softcap"):
        cross_entropy(logits, target, softcap=0.0)
    with pytest.raises(TypeError, match="logit_scale"):
        cross_entropy(logits, target, logit_scale=torch.tensor(2.0))
    with pytest.raises(TypeError, match="ignore_index"):
        cross_entropy(logits, target, ignore_index=1.5)
    with pytest.raises(ValueError, match="contiguous"):
        cross_entropy(random_tensor((10, 4)).t().requires_grad_(), target, grad_in_logits=True)


@pytest.mark.skipif(INTERPRETED, reason="bf16 arithmetic is wrong in the interpreter")
@pytest.mark.parametrize("options", [{}, dict(softcap=30.0, logit_scale=0.5, label_smoothing=0.1)])
def test_llama_vocabulary_bf16_on_gpu(options):
    logits, target = make_case(64, 128256, torch.bfloat16, n_ignored=5, scale=3.0)
    loss, grad = ours(logits, target, torch.tensor(1.0, device=DEVICE), **options)
    loss_ref, grad_ref = expected(logits, target, **options)
    assert_close(loss, loss_ref, dtype=torch.bfloat16, name="loss")
    assert_close(grad, grad_ref, dtype=torch.bfloat16, name="dlogits")


@pytest.mark.skipif(DEVICE != "cuda", reason="needs ~12 GB of GPU memory")
def test_more_than_2_31_elements_on_gpu():
    """Row offsets past 2**31 elements: with int32 offsets the last rows would be read from the wrong place."""
    n_rows, n_cols = 17000, 128256  # 2.18e9 elements, 4.4 GB in bf16
    logits = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.bfloat16).requires_grad_()
    target = torch.randint(0, n_cols, (n_rows,), device="cuda")
    target[::97] = -100
    loss = cross_entropy(logits, target, softcap=30.0)
    loss.backward()
    n_valid = (target != -100).sum().double()
    total = torch.zeros((), dtype=torch.float64, device="cuda")
    for start in range(0, n_rows, 2000):  # float64 reference, chunk by chunk on the GPU
        rows = slice(start, start + 2000)
        z = logits.detach()[rows].double().requires_grad_()
        ref = reference(z, target[rows], reduction="sum", softcap=30.0)
        (ref / n_valid).backward()
        total += ref.detach()
        if start in (0, 16000):  # the first rows and the rows past 2**31 elements
            assert_close(logits.grad[rows], z.grad, dtype=torch.bfloat16, name=f"dlogits rows {rows}")
    assert_close(loss.detach(), total / n_valid, dtype=torch.bfloat16, name="loss")


@pytest.mark.parametrize("grad_in_logits", [False, True], ids=["new-gradient", "in-place"])
def test_target_in_every_kind_of_chunk(grad_in_logits, monkeypatch):
    """Sweep 2 writes softmax alone and the target's column is overwritten once per row, after a
    barrier: targets at both ends of whole chunks and in the partial last chunk, in place or not."""
    monkeypatch.setattr(ce_module, "MAX_BLOCK_V", 256)  # 1000 columns: three whole chunks and 232 more
    targets = [0, 255, 256, 767, 768, 999, -100, 500]
    logits, target = make_case(len(targets), 1000)
    target.copy_(torch.tensor(targets))
    check_loss_and_gradient(
        logits, target, grad_in_logits=grad_in_logits, label_smoothing=0.1, softcap=4.0, logit_scale=0.7
    )
    check_loss_and_gradient(logits[:, :768], torch.where(target < 768, target, 3), grad_in_logits=grad_in_logits)


# --- Odd vocabularies: rows whose start is not a multiple of 16 bytes (issue 25) ---


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("n_cols", [1, 3, 7, 9, 17, 250, 1001])
def test_odd_vocabularies_every_row_alignment(n_cols, dtype, monkeypatch):
    """Each row is split into a head (before its first whole 16-byte vector), a body of whole vectors
    and a tail: 9 rows of an odd width start at every offset modulo the vector, widths below one
    vector have no body at all, and 64-column chunks make the body several chunks and a partial one."""
    monkeypatch.setattr(ce_module, "MAX_BLOCK_V", 64)
    logits, target = make_case(9, n_cols, dtype, n_ignored=1)
    target[0] = n_cols - 1  # the last column: in the tail when there is one
    options = dict(label_smoothing=0.1, softcap=4.0)
    go = random_tensor(9)
    loss_ref, grad_ref = expected(logits, target, grad_output=go, reduction="none", **options)
    loss, grad = ours(logits, target, grad_output=go, reduction="none", **options)
    assert_close(loss, loss_ref, dtype=dtype, name="loss")
    _, torch_grad = expected(logits.float(), target, grad_output=go, reduction="none", **options)
    assert_close(grad, grad_ref, dtype=dtype, baseline=torch_grad.to(dtype), name="dlogits")


@pytest.mark.parametrize("grad_in_logits", [False, True], ids=["new-gradient", "in-place"])
def test_row_strided_logits_with_an_odd_stride(grad_in_logits, monkeypatch):
    """The first V columns of a wider buffer (a padded vocabulary): x's rows and the gradient's rows
    start at different offsets; the gradient buffer is padded so that both agree modulo 16 elements."""
    monkeypatch.setattr(ce_module, "MAX_BLOCK_V", 64)
    wide = random_tensor((6, 307), scale=2.0)
    logits = wide[:, 2:301]  # row stride 307, 299 columns, starting 2 elements in
    target = torch.randint(0, 299, (6,), device=DEVICE)
    check_loss_and_gradient(logits, target, grad_in_logits=grad_in_logits, label_smoothing=0.05)
    grad = ce_module.gradient_buffer(logits)
    assert grad.shape == logits.shape and (grad.stride(0) - logits.stride(0)) % 16 == 0
    assert ce_module.gradient_buffer(wide).is_contiguous()


def _spy_on_kernel(monkeypatch) -> list[dict]:
    """The meta-parameters and layout arguments of every two-sweep launch."""
    calls, kernel = [], ce_module.cross_entropy_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **meta):
                calls.append(dict(meta, grid=grid, x_row_stride=args[7], grad_shift=args[8]))
                return kernel[grid](*args, **meta)

            return launch

    monkeypatch.setattr(ce_module, "cross_entropy_kernel", Spy())
    return calls


ROUND_VOCABULARY = {32001: 32000, 32064: 32000, 50257: 50304, 50264: 50304, 151936: 128256, 128256: 128256}


@pytest.mark.parametrize("odd, round_", list(ROUND_VOCABULARY.items()))
@pytest.mark.parametrize("write_grad", [True, False], ids=["fwd+bwd", "fwd"])
def test_dispatch_ignores_alignment(odd, round_, write_grad):
    """No shape class of its own for an odd vocabulary: every real vocabulary above one chunk gets the
    chunk and warps of the round one next to it (rows that are not 16-byte aligned take the same
    kernel, which finds each row's aligned body itself)."""
    assert ce_module.launch_config(odd, write_grad) == ce_module.launch_config(round_, write_grad)
    config = ce_module.launch_config(odd, write_grad)
    assert config["BLOCK_V"] == ce_module.MAX_BLOCK_V // (1 if write_grad else ce_module.FORWARD_ONLY_SHRINK)


@pytest.mark.parametrize("dtype, vec", [(torch.float32, 4), (torch.float16, 8)], ids=["fp32", "fp16"])
def test_launch_passes_vector_width_and_gradient_layout(dtype, vec, monkeypatch):
    """VEC is the values in 16 bytes; the gradient's rows sit exactly where the logits' rows do
    (grad_shift 0, a multiple of 16 that Triton specialises on) for contiguous logits; the head and
    tail code (EDGES) is compiled in only where some row starts or ends inside a vector."""
    calls = _spy_on_kernel(monkeypatch)
    for n_cols, edges in ((45, True), (48, False)):
        logits, target = make_case(3, n_cols, dtype)
        ours(logits, target)
        with torch.no_grad():
            cross_entropy(logits, target)
        with torch.no_grad():  # aligned width, odd row stride: the rows' starts move
            cross_entropy(random_tensor((3, n_cols + 1), dtype)[:, :n_cols], target)
        seen = [(c["VEC"], c["EDGES"], c["grad_shift"], c["x_row_stride"]) for c in calls]
        assert seen == [(vec, edges, 0, n_cols)] * 2 + [(vec, True, 0, n_cols + 1)]
        calls.clear()


# --- Issue 30: extreme values, degenerate batches, second derivatives, NumPy arguments ---


@pytest.mark.parametrize("magnitude, options", [(1e10, {}), (4.0, dict(logit_scale=1e9)), (3e9, dict(softcap=5e9))])
def test_huge_finite_logits_give_finite_losses(magnitude, options):
    """|z| past ~1.5e9: rounding the max times log2(e) to fp32 moved every exponent by up to half its
    ulp (hundreds), and 2^that overflowed or flushed to 0: ±inf losses, NaN gradients. The kernel now
    subtracts the max before it multiplies by log2(e)."""
    logits, target = make_case(4, 50, n_ignored=0, scale=magnitude)
    loss, grad = ours(logits, target, grad_output=random_tensor(4), reduction="none", **options)
    assert torch.isfinite(loss).all() and torch.isfinite(grad).all()
    go = random_tensor(4)
    loss, grad = ours(logits, target, grad_output=go, reduction="none", **options)
    loss_ref, grad_ref = expected(logits, target, grad_output=go, reduction="none", **options)
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(grad, grad_ref, dtype=torch.float32, name="dlogits")


def test_infinite_and_masked_logits_like_pytorch():
    """-inf logits (masked words) get probability 0; a target at -inf gives +inf; a row that is all -inf
    or holds +inf gives NaN: PyTorch's values, rows kept apart by reduction="none"."""
    logits, target = make_case(5, 40, n_ignored=0)
    logits[0, ::3] = -math.inf
    target[0] = 1  # a finite column of row 0
    logits[1, target[1]] = -math.inf
    logits[2] = -math.inf
    logits[3, 7] = math.inf
    for options in ({}, dict(label_smoothing=0.1), dict(softcap=3.0)):
        loss, grad = ours(logits, target, grad_output=torch.ones(5, device=DEVICE), reduction="none", **options)
        loss_ref, grad_ref = expected(
            logits, target, grad_output=torch.ones(5, device=DEVICE), reduction="none", **options
        )
        torch.testing.assert_close(loss.double(), loss_ref, equal_nan=True, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(grad.double(), grad_ref, equal_nan=True, rtol=1e-5, atol=1e-6)


def test_grad_in_logits_refuses_logits_that_share_memory():
    """Expanded logits (stride 0) or overlapping rows would get several gradient values written over one
    logit, and read a logit another row already overwrote: refused, not silently wrong."""
    row = random_tensor((1, 30))
    target = torch.randint(0, 30, (4,), device=DEVICE)
    for logits in (row.expand(4, 30), torch.as_strided(random_tensor(200), (4, 30), (10, 1))):
        with pytest.raises(ValueError, match="overlap"):
            cross_entropy(logits, target, grad_in_logits=True)
    expanded3 = random_tensor((1, 1, 30)).expand(2, 2, 30)
    with pytest.raises(ValueError, match="overlap"):
        cross_entropy(expanded3, target.view(2, 2), grad_in_logits=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_no_tokens_backward_gives_a_zero_gradient(reduction):
    """No tokens at all: PyTorch's loss (NaN for the mean, 0 for the sum, an empty vector), and a loss
    that stays in the graph, so backward() gives the empty gradient instead of raising."""
    for shape in ((0, 10), (2, 0, 10)):
        x = random_tensor(shape, requires_grad=True)
        target = torch.zeros(shape[:-1], dtype=torch.int64, device=DEVICE)
        loss = cross_entropy(x, target, reduction=reduction)
        loss_ref = torch.nn.functional.cross_entropy(
            x.detach().reshape(-1, 10), target.reshape(-1), reduction=reduction
        ).reshape(loss.shape)
        torch.testing.assert_close(loss, loss_ref, equal_nan=True)
        loss.sum().backward()
        assert x.grad is not None and x.grad.shape == x.shape


def test_second_derivatives_are_refused():
    """The gradient is computed in the forward by a kernel, not by differentiable operations: a double
    backward (a gradient penalty) through it must raise, not return zeros for the missing term."""
    logits, target = make_case(3, 40)
    x = logits.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="second derivative"):
        torch.autograd.grad(cross_entropy(x, target), x, create_graph=True)
    x = logits.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="second derivative"):
        torch.autograd.grad(ce_module.cross_entropy_grad_in_backward(x, target.clamp(min=0)), x, create_graph=True)
    x = logits.clone().requires_grad_()
    (g,) = torch.autograd.grad(cross_entropy(x, target), x)  # a first derivative alone is fine
    assert g.shape == x.shape


def test_numpy_scalars_are_accepted():
    logits, target = make_case(4, 60)
    np_options = dict(ignore_index=np.int64(-100), label_smoothing=np.float32(0.1))
    np_options.update(softcap=np.float64(6.0), logit_scale=np.float32(0.5))
    options = {k: v.item() for k, v in np_options.items()}
    loss, grad = ours(logits, target, **np_options)
    loss_ref, grad_ref = expected(logits, target, **options)
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(grad, grad_ref, dtype=torch.float32, name="dlogits")
    x = logits.clone().requires_grad_()
    cross_entropy(x, target, grad_in_logits=np.bool_(True)).backward()
    with pytest.raises(TypeError, match="ignore_index"):
        cross_entropy(logits, target, ignore_index=np.float64(-100))
    with pytest.raises(TypeError, match="ignore_index"):
        cross_entropy(logits, target, ignore_index=np.bool_(True))


@pytest.mark.skipif(INTERPRETED, reason="bf16 arithmetic is wrong in the interpreter; GPU-size rows")
@pytest.mark.parametrize("n_cols", [32001, 50257, 50264, 151936])
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "padded-vocabulary-view"])
def test_odd_vocabularies_bf16_on_gpu(n_cols, strided):
    """Real odd vocabularies, rows several chunks wide, every row alignment, in bf16 on the GPU (where
    the compiled loads are 16-byte vectors and a wrong alignment would be a wrong value, not a slow one)."""
    options = dict(label_smoothing=0.1, softcap=30.0)
    if strided:
        wide = random_tensor((40, n_cols + 47), torch.bfloat16, scale=3.0)
        logits = wide[:, 3 : 3 + n_cols]
    else:
        logits = random_tensor((40, n_cols), torch.bfloat16, scale=3.0)
    target = torch.randint(0, n_cols, (40,), device=DEVICE)
    target[7] = -100
    target[8] = n_cols - 1
    loss, grad = ours(logits, target, torch.tensor(1.0, device=DEVICE), **options)
    loss_ref, grad_ref = expected(logits, target, **options)
    assert_close(loss, loss_ref, dtype=torch.bfloat16, name="loss")
    assert_close(grad, grad_ref, dtype=torch.bfloat16, name="dlogits")
