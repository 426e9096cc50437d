"""The grouped GEMM against float64 PyTorch: both paths, every dtype, one to 64 experts, empty groups and
groups of one row, skewed routing, ragged K and N, strided operands, the backward, empty inputs, sizes
that break the contract, bad inputs, and launchers that never wait for the GPU.

The launchers' outputs are NaN-poisoned, so a row or a weight-gradient tile the kernels forget to write
fails. Under the interpreter the kernels upcast fp16/bf16 tiles to fp32 and bf16 stores truncate; the
GPU runs the same tests, plus larger problems and CUDA-graph replays with changed group sizes.
"""

import functools
import math

from academy import DEVICE, INTERPRETED
from academy.testing import (
    FLOAT_DTYPES,
    assert_close,
    assert_empty_gradients,
    assert_no_second_derivative,
    poison_allocations,
    random_tensor,
)

import pytest
import torch

from examples.grouped_gemm import kernel as gg
from examples.grouped_gemm import stages
from examples.grouped_gemm.kernel import grouped_matmul, max_m_tiles, reference, rows_config

gpu = pytest.mark.skipif(INTERPRETED, reason="GPU sizes and CUDA graphs need a GPU")


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, gg)


def sizes_for(kind: str) -> list[int]:
    """Group sizes of a routing (fresh random ones each run): zeros and ones are normal."""
    if kind == "one expert":
        return [37]
    if kind == "random":  # 8 experts, one empty and one of a single row among random sizes
        sizes = torch.randint(0, 30, (8,)).tolist()
        sizes[2], sizes[5] = 0, 1
        return sizes
    if kind == "skewed":  # one expert holds half the rows, three get none
        return [60, 0, 9, 1, 0, 14, 0, 36]
    if kind == "fine-grained":  # 64 experts of 0 to 4 rows
        return torch.randint(0, 5, (64,)).tolist()
    raise ValueError(kind)


def problem(sizes, K, N, dtype, requires_grad=True):
    group_sizes = torch.tensor(sizes, dtype=torch.int64, device=DEVICE)
    x = random_tensor((sum(sizes), K), dtype, requires_grad=requires_grad)
    w = random_tensor((len(sizes), K, N), dtype, requires_grad=requires_grad)
    return x, w, group_sizes


def expected(x, w, sizes, dy):
    """y, dx and dw in float64, by autograd through a loop over the experts."""
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_()
    y = torch.cat([rows @ w64[e] for e, rows in enumerate(x64.split(list(sizes)))])
    y.backward(dy.double())
    return y.detach(), x64.grad, w64.grad


def check(op, x, w, group_sizes, dtype, name=""):
    """Forward and backward of ``op`` against float64."""
    y = op(x, w, group_sizes)
    dy = random_tensor(tuple(y.shape), dtype)
    y.backward(dy)
    y64, dx64, dw64 = expected(x, w, group_sizes.tolist(), dy)
    assert_close(y, y64, dtype=dtype, name=f"{name} y")
    assert_close(x.grad, dx64, dtype=dtype, name=f"{name} dx")
    assert_close(w.grad, dw64, dtype=dtype, name=f"{name} dw")


@pytest.mark.parametrize("path", ["tma", "pointer"])
@pytest.mark.parametrize("kind", ["one expert", "random", "skewed", "fine-grained"])
def test_routings_forward_and_backward(kind, path):
    K, N = (32, 24) if kind == "fine-grained" else (40, 72)  # 64 experts: keep the interpreter's grids short
    x, w, group_sizes = problem(sizes_for(kind), K, N, torch.float16)
    check(functools.partial(grouped_matmul, path=path), x, w, group_sizes, torch.float16, f"{kind} {path}")


@pytest.mark.parametrize("path", ["tma", "pointer"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_every_dtype(dtype, path):
    x, w, group_sizes = problem(sizes_for("random"), 48, 40, dtype)
    check(functools.partial(grouped_matmul, path=path), x, w, group_sizes, dtype, f"{dtype} {path}")


@pytest.mark.parametrize(("K", "N"), [(100, 24), (20, 70), (1, 5)])
def test_ragged_k_and_n_take_the_pointer_path(K, N):
    """Rows of 200 or 40 bytes (fp16) are not 16-byte aligned: TMA cannot read them, auto uses pointers."""
    x, w, group_sizes = problem([9, 0, 30, 1], K, N, torch.float16)
    check(grouped_matmul, x, w, group_sizes, torch.float16, f"K={K} N={N}")
    with pytest.raises(ValueError, match="TMA"):
        grouped_matmul(x, w, group_sizes, path="tma")


@pytest.mark.parametrize("path", ["auto", "pointer"])
def test_strided_operands(path):
    """x a column slice of a wider matrix, w the transpose of an (E, N, K) stack (nn.Linear layout)."""
    sizes = [5, 0, 17, 1]
    wide = random_tensor((sum(sizes), 96), torch.float16)
    x = wide[:, 16:64].requires_grad_()
    w = random_tensor((4, 24, 48), torch.float16).transpose(1, 2).requires_grad_()
    group_sizes = torch.tensor(sizes, device=DEVICE, dtype=torch.int32)
    check(functools.partial(grouped_matmul, path=path), x, w, group_sizes, torch.float16, path)


def test_int32_sizes_and_a_strided_size_vector():
    sizes = torch.tensor([[3, 99], [0, 99], [12, 99]], device=DEVICE, dtype=torch.int32)[:, 0]  # stride 2
    x, w, _ = problem([3, 0, 12], 32, 32, torch.float32)
    check(grouped_matmul, x, w, sizes, torch.float32)


def test_no_grad_and_grad_of_one_input():
    x, w, group_sizes = problem([4, 0, 9], 32, 40, torch.float32, requires_grad=False)
    with torch.no_grad():
        y = grouped_matmul(x, w, group_sizes)
    assert_close(y, expected(x, w, [4, 0, 9], random_tensor((13, 40)))[0])
    w.requires_grad_()
    y = grouped_matmul(x, w, group_sizes)
    dy = random_tensor(tuple(y.shape))
    y.backward(dy)
    assert x.grad is None
    assert_close(w.grad, expected(x, w, [4, 0, 9], dy)[2])


@pytest.mark.parametrize(
    ("sizes", "K", "N"),
    [([0, 0, 0], 32, 40), ([3, 4], 0, 16), ([3, 4], 16, 0), ([], 32, 40)],
    ids=["no rows", "K = 0", "N = 0", "no experts"],
)
def test_empty_inputs_get_zero_gradients(sizes, K, N):
    """Empty x, K or N: outputs of the right shape (an empty sum is 0), and gradients of zeros."""
    x, w, group_sizes = problem(sizes, K, N, torch.float32)
    y = grouped_matmul(x, w, group_sizes)
    assert y.shape == (sum(sizes), N)
    assert not y.isnan().any() and not y.count_nonzero()
    assert_empty_gradients(grouped_matmul, x, w, group_sizes)


def test_double_backward_raises():
    x, w, group_sizes = problem([5, 0, 7], 32, 24, torch.float32)
    assert_no_second_derivative(grouped_matmul, x, w, group_sizes)


# --------------------------------------------------------------------------- sizes off the contract


def effective_bounds(sizes, T):
    """Each group's rows as the kernels read a contract-breaking vector: negative sizes count as empty,
    groups are cut at row T."""
    bounds, seen = [], 0
    for size in sizes:
        start = min(seen, T)
        seen += max(size, 0)
        bounds.append((start, min(seen, T)))
    return bounds


def guarded(shape, dtype, fill):
    """A tensor in the middle of a larger buffer whose guard rows hold ``fill``: reads or writes past
    either end of the tensor would show."""
    rows = shape[0]
    buffer = torch.full((rows + 64, *shape[1:]), fill, dtype=dtype, device=DEVICE)
    return buffer, buffer[32 : 32 + rows]


@pytest.mark.parametrize("path", ["tma", "pointer"])
@pytest.mark.parametrize(
    "sizes",
    [[5, 2, 0, 3], [20, 9, 30, 12], [4, -7, 9, 30], [2**40, 3, 0, 1]],
    ids=["sum below T", "sum above T", "negative size", "huge size"],
)
def test_sizes_that_do_not_sum_to_t_stay_in_bounds(monkeypatch, sizes, path):
    """The caller guarantees sum(sizes) == T, which the launcher cannot check without a sync. When it is
    broken, every group the kernels compute is right for the rows it keeps, rows past the groups are left
    unwritten, and nothing outside y, dx and dw is written (their NaN guard rows stay NaN) nor anything
    outside x and w read into a result (their guard rows hold inf, and every kept result is finite)."""
    T, K, N = 37, 32, 40
    x_buffer, x = guarded((T, K), torch.float32, math.inf)
    x.copy_(random_tensor((T, K)))
    w_buffer, w = guarded((4, K, N), torch.float32, math.inf)
    w.copy_(random_tensor((4, K, N)))
    outputs = []

    def empty(*size, dtype=None, device=None, **kwargs):
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
        buffer, view = guarded(shape, dtype, math.nan)
        outputs.append((buffer, view))
        return view

    monkeypatch.setattr(gg.torch, "empty", empty)
    x.requires_grad_()
    w.requires_grad_()
    y = grouped_matmul(x, w, torch.tensor(sizes, device=DEVICE), path=path)
    dy = random_tensor((T, N))
    y.backward(dy)
    for buffer, view in outputs:  # y, dx, dw: their guard rows were never written
        assert buffer[:32].isnan().all() and buffer[32 + view.shape[0] :].isnan().all()
    assert torch.isinf(x_buffer[:32]).all() and torch.isinf(w_buffer[:32]).all()
    covered = torch.zeros(T, dtype=torch.bool, device=DEVICE)
    for e, (start, end) in enumerate(effective_bounds(sizes, T)):
        rows = slice(start, end)
        covered[rows] = True
        assert_close(y[rows], x[rows].double() @ w[e].double(), name=f"y of group {e}")
        assert_close(x.grad[rows], dy[rows].double() @ w[e].double().T, name=f"dx of group {e}")
        want_dw = x[rows].double().T @ dy[rows].double()
        assert_close(w.grad[e], want_dw, tol=1e-5 if end > start else 0.0, name=f"dw of group {e}")
    assert y[~covered].isnan().all() and x.grad[~covered].isnan().all()  # unwritten, not made up


# --------------------------------------------------------------------------- bad inputs


def _inputs(**changes):
    args = dict(
        x=random_tensor((7, 32)),
        w=random_tensor((3, 32, 16)),
        group_sizes=torch.tensor([2, 0, 5], device=DEVICE),
    )
    args.update(changes)
    return args


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"x": random_tensor((7, 32, 1))}, ValueError, r"x must be \(T, K\)"),
        ({"w": random_tensor((32, 16))}, ValueError, r"w \(E, K, N\)"),
        ({"w": random_tensor((3, 31, 16))}, ValueError, "inner dimensions differ"),
        ({"w": random_tensor((3, 32, 16), torch.float16)}, TypeError, "dtypes differ"),
        ({"x": random_tensor((7, 32), torch.float64)}, TypeError, "x has dtype torch.float64"),
        ({"group_sizes": torch.tensor([2.0, 0.0, 5.0], device=DEVICE)}, TypeError, "group_sizes has dtype"),
        ({"group_sizes": torch.tensor([2, 5], device=DEVICE)}, ValueError, r"group_sizes must be \(3,\)"),
        ({"group_sizes": torch.tensor([[2, 0, 5]], device=DEVICE)}, ValueError, r"group_sizes must be \(3,\)"),
        ({"group_sizes": [2, 0, 5]}, TypeError, "group_sizes must be a torch.Tensor"),
        (
            {"w": random_tensor((0, 32, 16)), "group_sizes": torch.zeros(0, dtype=torch.int64, device=DEVICE)},
            ValueError,
            "7 rows but no experts",
        ),
        (
            {"w": random_tensor((1025, 32, 1)), "group_sizes": torch.zeros(1025, dtype=torch.int64, device=DEVICE)},
            ValueError,
            "at most 1024",
        ),
    ],
)
def test_bad_inputs(changes, error, match):
    with pytest.raises(error, match=match):
        grouped_matmul(**_inputs(**changes))


def test_bad_options():
    with pytest.raises(ValueError, match="path must be one of"):
        grouped_matmul(**_inputs(), path="cuda")
    with pytest.raises(ValueError, match="unknown keys"):
        grouped_matmul(**_inputs(), config={"BLOCK_Q": 64})
    with pytest.raises(ValueError, match="power of two"):
        grouped_matmul(**_inputs(), grad_config={"BLOCK_R": 24})


@pytest.mark.skipif(DEVICE != "cuda", reason="a CPU tensor is the wrong device only when kernels run on the GPU")
def test_sizes_on_the_host_are_refused():
    with pytest.raises(ValueError, match="group_sizes is on cpu"):
        grouped_matmul(**_inputs(group_sizes=torch.tensor([2, 0, 5])))


# --------------------------------------------------------------------------- no host synchronisation


SYNC_FREE = {"academy": grouped_matmul, **{name: op for name, op in stages.STAGES.items() if name != "loop"}}


@pytest.mark.parametrize("name", list(SYNC_FREE))
def test_launchers_never_read_a_tensor_on_the_host(monkeypatch, name):
    """On the CPU nothing waits, so a sync cannot be seen; instead every way of reading a tensor's value
    into Python raises, and forward and backward must still run. The loop stage, which does read the
    sizes, fails the same check."""
    x, w, group_sizes = problem([6, 0, 1, 20], 32, 40, torch.float32)
    dy = random_tensor((27, 40))

    def refuse(self, *args, **kwargs):
        raise AssertionError("a tensor was read on the host")

    for method in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):
        monkeypatch.setattr(torch.Tensor, method, refuse)
    SYNC_FREE[name](x, w, group_sizes).backward(dy)
    with pytest.raises(AssertionError, match="read on the host"):
        stages.STAGES["loop"](x, w, group_sizes)
    monkeypatch.undo()
    assert_close(w.grad, expected(x, w, [6, 0, 1, 20], dy)[2])


@gpu
def test_gpu_graph_replay_follows_new_group_sizes():
    """Forward and backward run under sync debug mode "error", and one CUDA graph, captured once,
    gives the right y, dx and dw after the group sizes change in place (the next batch's routing)."""
    sizes = [300, 0, 1, 700, 23, 0, 0, 200]
    x, w, group_sizes = problem(sizes, 520, 264, torch.bfloat16)
    dy = random_tensor((sum(sizes), 264), torch.bfloat16)
    for op in SYNC_FREE.values():  # compile outside the checks
        op(x, w, group_sizes).backward(dy)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for op in SYNC_FREE.values():
            op(x, w, group_sizes).backward(dy)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    x.grad = w.grad = None
    with torch.cuda.graph(graph):
        y = grouped_matmul(x, w, group_sizes)
        dx, dw = torch.autograd.grad(y, (x, w), dy)
    for new in ([1224, 0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1217], [100, 200, 0, 300, 24, 400, 100, 100]):
        group_sizes.copy_(torch.tensor(new))
        graph.replay()
        y64, dx64, dw64 = expected(x, w, new, dy)
        assert_close(y, y64, dtype=torch.bfloat16, name=f"y {new}")
        assert_close(dx, dx64, dtype=torch.bfloat16, name=f"dx {new}")
        assert_close(dw, dw64, dtype=torch.bfloat16, name=f"dw {new}")


@gpu
@pytest.mark.parametrize("path", ["tma", "pointer"])
@pytest.mark.parametrize(("E", "rows"), [(8, 1000), (64, 40)], ids=["8 experts", "64 experts"])
def test_gpu_sizes_bf16(E, rows, path):
    """Many K steps and many tiles per group in bf16, the dtype the interpreter cannot check end to end."""
    sizes = torch.multinomial(torch.ones(E), E * rows, replacement=True).bincount(minlength=E).tolist()
    sizes[1] = 0
    x, w, group_sizes = problem(sizes[:E], 1000, 776, torch.bfloat16)
    check(functools.partial(grouped_matmul, path=path), x, w, group_sizes, torch.bfloat16, f"E={E} {path}")


# --------------------------------------------------------------------------- configs and the reference


def test_tile_class_follows_rows_per_expert(monkeypatch):
    monkeypatch.setattr(gg, "INTERPRETED", False)
    assert rows_config(8192, 8, torch.bfloat16)["BLOCK_N"] == 256  # Mixtral: 1024 rows per expert
    assert rows_config(32768, 256, torch.bfloat16)["BLOCK_M"] == 64  # DeepSeek-V3: 128 rows per expert
    assert gg.tile_class(4096, 16, torch.float16) == "medium"
    assert gg.tile_class(4096, 16, torch.float32) == "fp32"
    assert rows_config(8192, 8, torch.bfloat16, {"num_stages": 2})["num_stages"] == 2


def test_grid_bound_never_depends_on_the_sizes():
    """Every routing of 1000 rows over 8 experts fits the grid the launcher sizes from T and E alone."""
    T, E, bm = 1000, 8, 16
    for sizes in ([1000] + [0] * 7, [993] + [1] * 7, [125] * 8, [0, 0, 1000, 0, 0, 0, 0, 0]):
        assert sum(-(-s // bm) for s in sizes) <= max_m_tiles(T, E, bm)


def test_reference_refuses_sizes_that_do_not_sum_to_t():
    with pytest.raises(RuntimeError, match="split"):
        reference(random_tensor((7, 32)), random_tensor((3, 32, 16)), torch.tensor([2, 0, 4], device=DEVICE))
