"""The final matmul op against float64 PyTorch: every path, dtype, layout, epilogue and bad input.

Under the interpreter the kernels upcast fp16/bf16 tiles to fp32 before
``tl.dot`` and bf16 stores truncate, so every dtype is checked against a
float64 reference with the dtype's tolerance (1e-2 for fp16/bf16).
"""

import json
from pathlib import Path

from academy import DEVICE, INTERPRETED
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import numpy as np
import pytest
import torch

from examples.matmul import kernel as mm
from examples.matmul.kernel import ACTIVATIONS, apply_activation, choose_path, matmul, reference

PATHS = ["tma", "pointer", "split_k", "gemv"]


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, mm)


def expected(a, b, activation=None):
    return apply_activation(a.double() @ b.double(), activation)


def operand(rows, cols, dtype, layout):
    """A (rows, cols) matrix stored row-major, column-major, or as a strided slice."""
    if layout == "row":
        return random_tensor((rows, cols), dtype)
    if layout == "column":
        return random_tensor((cols, rows), dtype).T
    return random_tensor((rows, 2 * cols + 3), dtype)[:, 1 : 2 * cols : 2]  # unit stride nowhere: pointer path only


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(37, 40, 72), (70, 24, 264), (1, 56, 128)], ids=lambda s: "x".join(map(str, s)))
def test_every_path_and_dtype(path, dtype, shape):
    M, N, K = shape
    a, b = random_tensor((M, K), dtype), random_tensor((K, N), dtype)
    assert_close(matmul(a, b, path=path), expected(a, b), dtype=dtype, name=f"{path} {shape}")


@pytest.mark.parametrize("activation", ACTIVATIONS[1:])
@pytest.mark.parametrize("path", PATHS)
def test_fused_epilogues(activation, path):
    a, b = random_tensor((40, 264), torch.float16), random_tensor((264, 48), torch.float16)
    assert_close(matmul(a, b, activation, path=path), expected(a, b, activation), dtype=torch.float16)


@pytest.mark.parametrize("layouts", [("row", "column"), ("column", "row"), ("column", "column"), ("sliced", "sliced")])
@pytest.mark.parametrize("path", ["auto", "pointer", "split_k", "gemv"])
def test_strides(layouts, path):
    a = operand(33, 264, torch.float16, layouts[0])
    b = operand(264, 40, torch.float16, layouts[1])
    assert_close(matmul(a, b, "relu", path=path), expected(a, b, "relu"), dtype=torch.float16)


@pytest.mark.parametrize("path", ["auto", *PATHS])
@pytest.mark.parametrize("M", [1, 5, 40])
def test_out_fills_a_block_of_a_wider_matrix(path, M):
    """``out`` a column block of a NaN-filled matrix: the block gets act(a @ b), nothing else is touched."""
    a, b = random_tensor((M, 264), torch.float16), random_tensor((264, 48), torch.float16)
    wide = torch.full((M, 80), float("nan"), dtype=torch.float16, device=DEVICE)
    result = matmul(a, b, "relu", path=path, out=wide[:, 16:64], config={"SPLIT_K": 2} if path == "split_k" else None)
    assert result.data_ptr() == wide[:, 16:64].data_ptr()
    assert_close(wide[:, 16:64], expected(a, b, "relu"), dtype=torch.float16)
    assert wide[:, :16].isnan().all() and wide[:, 64:].isnan().all()


def test_out_column_major_is_written_by_the_pointer_kernel():
    a, b = random_tensor((40, 72), torch.float16), random_tensor((72, 48), torch.float16)
    out = torch.empty((48, 40), dtype=torch.float16, device=DEVICE).T
    assert choose_path(40, 48, 72, a, b, out) == "pointer"
    with pytest.raises(ValueError, match="TMA"):
        matmul(a, b, path="tma", out=out)
    matmul(a, b, out=out)
    assert_close(out, expected(a, b), dtype=torch.float16)


@pytest.mark.parametrize(
    ("out", "match"),
    [
        (lambda: torch.empty((4, 9), dtype=torch.float16, device=DEVICE), "out must be \\(4, 8\\)"),
        (lambda: torch.empty((4, 8), dtype=torch.float32, device=DEVICE), "out must be torch.float16"),
    ],
)
def test_bad_out(out, match):
    with pytest.raises(ValueError, match=match):
        matmul(random_tensor((4, 32), torch.float16), random_tensor((32, 8), torch.float16), out=out())


@pytest.mark.parametrize("operand", ["a", "b"])
def test_out_sharing_memory_with_an_operand_is_refused(operand):
    """Written while still read, an aliased output would be a silent wrong answer: refuse it."""
    a, b = random_tensor((32, 32), torch.float16), random_tensor((32, 32), torch.float16)
    with pytest.raises(ValueError, match=f"out overlaps {operand}"):
        matmul(a, b, out={"a": a, "b": b}[operand])
    tall = random_tensor((64, 32), torch.float16)  # operand rows and output rows of one buffer: disjoint
    want = expected(tall[:32], b)
    assert_close(matmul(tall[:32], b, out=tall[32:]), want, dtype=torch.float16)


@pytest.mark.parametrize("path", PATHS)
def test_out_whose_elements_overlap_is_refused(path):
    """A stride-0 out would have each element written by several programs: garbage, silently (PyTorch
    refuses such an out too)."""
    a, b = random_tensor((8, 32), torch.float16), random_tensor((32, 24), torch.float16)
    rows = torch.empty((1, 24), dtype=torch.float16, device=DEVICE).expand(8, 24)
    with pytest.raises(ValueError, match="out has elements that share memory"):
        matmul(a, b, path=path, out=rows)
    columns = torch.empty((8, 1), dtype=torch.float16, device=DEVICE).expand(8, 24)
    with pytest.raises(ValueError, match="out has elements that share memory"):
        matmul(a, b, path=path, out=columns)


@pytest.mark.parametrize(
    "path, config, match",
    [
        ("pointer", {"BLOCK_M": 48}, r"config\['BLOCK_M'\] must be a power of two >= 16, got 48"),
        ("tma", {"BLOCK_X": 16}, r"config has unknown keys \['BLOCK_X'\]"),
        ("split_k", {"BLOCK_K": 8}, r"config\['BLOCK_K'\] must be a power of two >= 16"),
        ("split_k", {"SPLIT_K": -1}, r"config\['SPLIT_K'\] must be a positive int"),
        ("gemv", {"BLOCK_N": 24}, r"config\['BLOCK_N'\] must be a power of two >= 1"),
        ("auto", {"num_warps": 3}, r"config\['num_warps'\] must be a power of two"),
    ],
)
def test_bad_config_is_a_clear_error(path, config, match):
    """Triton's own errors ("Shape element 0 must be a power of 2") named no config key, and unknown
    keys were silently ignored."""
    a, b = random_tensor((40, 256), torch.float16), random_tensor((256, 24), torch.float16)
    with pytest.raises(ValueError, match=match):
        matmul(a, b, path=path, config=config)


def test_pdl_switch_is_accepted_on_every_path():
    a, b = random_tensor((40, 32), torch.float16), random_tensor((32, 24), torch.float16)
    assert_close(matmul(a, b, config={"PDL": False}), expected(a, b), dtype=torch.float16)


def test_operands_that_require_grad_are_refused():
    """matmul has no backward: its result would carry no gradient, and the graph would be cut silently."""
    a, b = random_tensor((8, 16), requires_grad=True), random_tensor((16, 8))
    with pytest.raises(ValueError, match="matmul is forward only .* a requires grad"):
        matmul(a, b)
    with torch.no_grad():
        assert_close(matmul(a, b), expected(a.detach(), b), dtype=torch.float32)


def test_numpy_allow_tf32_is_accepted():
    a, b = random_tensor((8, 16)), random_tensor((16, 8))
    assert_close(matmul(a, b, allow_tf32=np.bool_(False)), expected(a, b), dtype=torch.float32)
    with pytest.raises(TypeError, match="allow_tf32 must be a bool, got str"):
        matmul(a, b, allow_tf32="no")


@pytest.mark.parametrize("layouts", [("row", "column"), ("column", "row"), ("column", "column")])
def test_tma_reads_column_major_through_transposed_descriptors(layouts):
    a = operand(40, 72, torch.float16, layouts[0])
    b = operand(72, 48, torch.float16, layouts[1])
    assert mm._tma_layout(a) and mm._tma_layout(b)
    assert_close(matmul(a, b, path="tma"), expected(a, b), dtype=torch.float16)


def test_tma_refuses_strides_it_cannot_take_and_auto_falls_back():
    a, b = operand(33, 70, torch.float16, "row"), operand(70, 40, torch.float16, "row")  # 140-byte rows
    assert mm._tma_layout(a) is None
    with pytest.raises(ValueError, match="TMA"):
        matmul(a, b, path="tma")
    assert choose_path(33, 40, 70, a, b) == "pointer"
    assert_close(matmul(a, b), expected(a, b), dtype=torch.float16)


def test_dispatch_rule():
    big = random_tensor((128, 256), torch.float16), random_tensor((256, 64), torch.float16)
    assert choose_path(1, 64, 256, *big) == ("gemv" if mm.GEMV_MAX_M >= 1 else "split_k")
    assert choose_path(mm.GEMV_MAX_M + 1, 64, 256, *big) == "split_k"
    assert choose_path(mm.SMALL_M + 1, 64, 256, *big) == ("tma" if mm.tma_available() else "pointer")
    assert choose_path(16, 64, 32, *big) != "split_k"  # too short a K to split


# (M, N, K) of model-zoo projections at short prefills, and the kernel and tile row each takes on
# 132 SMs (H100 and H200): the waves rule of tile_class and the split of splits_short_prefill.
SHORT_PREFILL_DISPATCH = [
    ((128, 576, 7168), "split_k"),  # DeepSeek-V3 kv_a: 18 tiles even at 64×64, K long
    ((128, 1536, 7168), "split_k"),  # 48 tiles, under half the SMs
    ((128, 2048, 2048), "few"),  # 64 tiles but K short: one wave of 64×64
    ((128, 4096, 14336), "few"),  # 128 tiles of 64×64: one full wave
    ((128, 4608, 3584), "narrow"),  # 144 tiles of 64×64 would be two waves; 72 of 64×128 are one
    ((128, 8192, 8192), "narrow"),
    ((128, 12288, 4096), "medium"),  # 96 tiles of 128×128: one wave, against 3 of 64×64
    ((256, 12288, 4096), "narrow"),  # 3 waves × 3 beat 2 waves × 5
    ((256, 28672, 4096), "large"),
    ((512, 1536, 7168), "narrow"),
    ((512, 768, 768), "few"),
]


@pytest.mark.parametrize("shape, expected_row", SHORT_PREFILL_DISPATCH)
def test_short_prefill_dispatch(monkeypatch, shape, expected_row):
    monkeypatch.setattr(mm, "sm_count", lambda: 132)
    M, N, K = shape
    split = expected_row == "split_k"
    assert mm.splits_short_prefill(M, N, K) == split
    if not split:
        assert mm.tile_class(M, N, torch.float16) == expected_row
    assert mm.tile_class(M, N, torch.float32) == "fp32"


SWEEP_ROWS = {"few": "academy:t64x64", "narrow": "academy:t64x128", "medium": "academy:t128x128w8"}
"""The providers of tools/matmul_prefill_tiles.py that time each TILE_CONFIGS row forced."""


def test_waves_rule_picks_the_fastest_row_of_the_sweep(monkeypatch):
    """Replays the committed H200 sweep the costs were fitted to: wherever the rule chooses among the three
    rows, its row was the fastest of them (on a copy of the rows' configs, so a retuned row fails here too)."""
    monkeypatch.setattr(mm, "sm_count", lambda: 132)
    sweep = Path(__file__).parents[2] / "tools" / "matmul_prefill_tiles.h200.jsonl"
    chosen = 0
    for line in sweep.read_text().splitlines():
        record = json.loads(line)
        M, N, K, us = record["M"], record["N"], record["K"], record["us"]
        assert record["sms"] == 132
        row = mm.tile_class(M, N, torch.float16)
        if mm.splits_short_prefill(M, N, K) or row == "large":
            continue
        assert us[SWEEP_ROWS[row]] == min(us[p] for p in SWEEP_ROWS.values()), (M, N, K, row, us)
        chosen += 1
    assert chosen == 35


@pytest.mark.parametrize("path", ["split_k", "gemv"])
@pytest.mark.parametrize("K", [300, 1000])
def test_split_k_slices_cover_k_exactly(K, path):
    """K not a multiple of the slice: the last slice is short, nothing is summed twice."""
    a, b = random_tensor((3, K), torch.float32), random_tensor((K, 40), torch.float32)
    config = {"SPLIT_K": 4, "BLOCK_K": 32}
    assert_close(matmul(a, b, path=path, config=config), expected(a, b), dtype=torch.float32)


@pytest.mark.parametrize("layout", ["row", "column"])
def test_gemv_one_row_blocks(layout):
    """BLOCK_M = 1 (the GPU decode config): one program row per output row, both weight layouts."""
    a, b = random_tensor((2, 200), torch.float16), operand(200, 24, torch.float16, layout)
    config = {"BLOCK_M": 1, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": 2}
    assert_close(matmul(a, b, "gelu", path="gemv", config=config), expected(a, b, "gelu"), dtype=torch.float16)


def test_gemv_dispatch_switch(monkeypatch):
    big = (random_tensor((1, 256), torch.float16), random_tensor((256, 64), torch.float16))
    monkeypatch.setattr(mm, "GEMV_MAX_M", 4)
    assert choose_path(1, 64, 256, *big) == "gemv"
    assert choose_path(5, 64, 256, *big) == "split_k"


def test_chained_decode_matmuls_each_read_the_last_ones_output():
    """Each decode matmul reads the one before's output. With programmatic dependent launch a kernel starts
    before its predecessor has finished, so a read before its wait would see stale or poisoned values. On a
    GPU the chain is also replayed from a CUDA graph after its input changed in place: a stale read there
    would see the previous replay's values, which are plausible numbers."""
    n = 256
    weights = [random_tensor((n, n), torch.float16, scale=1 / 16) for _ in range(6)]
    x = random_tensor((16, n), torch.float16)
    assert choose_path(16, n, n, x, weights[0]) == "split_k"

    def chain():
        outs = [x]
        for w in weights:
            outs.append(matmul(outs[-1], w))
        return outs

    def check(outs):
        for before, w, out in zip(outs, weights, outs[1:]):
            assert_close(out, before.double() @ w.double(), dtype=torch.float16)

    check(chain())
    if DEVICE == "cuda":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = chain()
        x.copy_(random_tensor((16, n), torch.float16))
        graph.replay()
        check(outs)


@pytest.mark.parametrize(
    ("M", "N", "K", "block_n", "split"),
    [
        (16, 4096, 4096, 32, 1),  # K too short to split: narrower column blocks
        (16, 4096, 14336, 64, 2),  # long K: two slices of 64 columns
        (16, 14336, 4096, 128, 1),  # wide weight: 112 programs already fill half the SMs
        (1, 512, 65536, 64, 16),  # few columns, very long K: slices of 4096
        (16, 4608, 3584, 64, 1),  # 72 programs of 64 columns: over half the SMs, K whole
        (16, 2304, 2048, 32, 1),  # 72 programs of 32 columns: over half, no short slices
        (16, 576, 7168, 32, 8),  # DeepSeek-V3 kv_a: 18 programs at 32 columns -> 8 slices of 896, 144 programs
        (1, 576, 7168, 32, 8),
        (1, 1536, 7168, 32, 4),  # DeepSeek-V3 q_a: 48 -> 192 programs, slices of 1792
        (16, 1600, 6400, 32, 4),  # GPT-2 XL down: 50 -> 200
        (16, 2048, 2048, 32, 2),  # Llama-3.2-1B o: 64 -> 128, then a slice of 512 would be under a pipeline
        (1, 768, 3072, 32, 4),  # GPT-2 down: 96 programs, stopped by the slice floor (768 = 6 steps of 128)
        (16, 896, 4864, 32, 4),  # Qwen2.5-0.5B down: 112, stopped by the floor
        (16, 1600, 1600, 32, 2),  # GPT-2 XL o: 100
        (1, 768, 768, 32, 1),  # GPT-2 o: K is one pipeline, nothing to split
    ],
)
def test_decode_split_k_config_on_an_h100(monkeypatch, M, N, K, block_n, split):
    """The GPU rule (132 SMs): narrow to 64 columns, split long K, then narrow to 32 — until half the SMs have
    work; a weight still under half the SMs at 32 columns splits K on, into slices of at least one pipeline
    (6 steps of 128), until every SM has work."""
    monkeypatch.setattr(mm, "INTERPRETED", False)
    monkeypatch.setattr(mm, "sm_count", lambda: 132)
    config = mm.split_k_config(M, N, K, torch.bfloat16)
    assert (config["BLOCK_N"], config["SPLIT_K"]) == (block_n, split)
    narrow = block_n < 64
    assert config["num_stages"] == (mm.DECODE_NARROW_STAGES if narrow else mm.SPLIT_K_CONFIGS["decode"]["num_stages"])
    assert mm.split_k_config(M, N, K, torch.bfloat16, {"num_stages": 2})["num_stages"] == 2  # an override wins


@pytest.mark.parametrize(
    ("sms", "N", "K", "block_n", "split"),
    [
        (114, 576, 7168, 32, 8),  # 18 -> 144 programs: 72 would still be under 114
        (114, 1536, 7168, 32, 4),  # 48 < 57: split on to 192
        (114, 2048, 2048, 32, 1),  # 64 programs fill half of 114 SMs: no short slices
        (78, 576, 7168, 32, 8),  # 18 -> 144 (72 < 78)
        (78, 1536, 7168, 32, 1),  # 48 >= 39: half the SMs already
        (78, 768, 3072, 32, 4),  # 24 -> 96, and a slice of 384 would be under a pipeline
        (78, 3072, 4096, 64, 1),  # 48 programs of 64 columns fill half of 78 SMs
    ],
)
def test_decode_split_k_config_on_other_sm_counts(monkeypatch, sms, N, K, block_n, split):
    """The same rule on GPUs with fewer SMs (114: H100 PCIe; 78): which weights count as narrow moves with
    the SM count."""
    monkeypatch.setattr(mm, "INTERPRETED", False)
    monkeypatch.setattr(mm, "sm_count", lambda: sms)
    config = mm.split_k_config(16, N, K, torch.bfloat16)
    assert (config["BLOCK_N"], config["SPLIT_K"]) == (block_n, split)


@pytest.mark.parametrize("sms", [132, 114, 78])
def test_decode_rule_on_every_zoo_projection(monkeypatch, sms):
    """The rule's promises on every projection of the model zoo: slices shorter than DECODE_SPLIT_MIN_K
    only for a weight under half the SMs at 32 columns, each at least one pipeline long, doubled only while
    the grid was under the SM count; a grid left under half the SMs is one the slice floor stopped."""
    from academy.bench.models import projections

    monkeypatch.setattr(mm, "INTERPRETED", False)
    monkeypatch.setattr(mm, "sm_count", lambda: sms)
    floor = mm.DECODE_NARROW_STAGES * mm.SPLIT_K_CONFIGS["decode"]["BLOCK_K"]
    for projection in projections():
        N, K = projection.value.N, projection.value.K
        config = mm.split_k_config(16, N, K, torch.bfloat16)
        block_n, split = config["BLOCK_N"], config["SPLIT_K"]
        programs = -(-N // block_n) * split
        if split > 1 and K // split < mm.DECODE_SPLIT_MIN_K:  # short slices
            assert block_n == 32 and -(-N // 32) < sms // 2, (N, K)
            assert K // split >= floor and programs // 2 < sms, (N, K, split)
        if programs < sms // 2:
            assert block_n == 32 and K // (2 * split) < floor, (N, K, split)


def test_decode_split_k_runs_the_short_slices_it_picks(monkeypatch):
    """A shape that the GPU rule splits into short slices (here on an 8-SM GPU, so that the interpreter
    runs it in a second): the config it picks, run, gives the product, with the last slice ragged."""
    M, N, K = 5, 48, 3200  # 2 column blocks of 32; K = 3 slices of 896 and one of 512
    with monkeypatch.context() as gpu:
        gpu.setattr(mm, "INTERPRETED", False)
        gpu.setattr(mm, "sm_count", lambda: 8)
        config = mm.split_k_config(M, N, K, torch.bfloat16)
    assert (config["BLOCK_N"], config["SPLIT_K"]) == (32, 4)  # 2 programs -> 8: every SM
    slices = []
    sum_slices = mm._sum_slices

    def counting(partials, *rest):
        slices.append(partials.shape[0])
        sum_slices(partials, *rest)

    monkeypatch.setattr(mm, "_sum_slices", counting)
    a, b = random_tensor((M, K), torch.bfloat16), operand(K, N, torch.bfloat16, "column")
    overrides = {key: config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K")}
    out = matmul(a, b, "gelu", path="split_k", config=overrides)
    assert slices == [4]
    assert_close(out, expected(a, b, "gelu"), dtype=torch.bfloat16)


def test_prefill_split_k_config_fills_the_gpu_but_keeps_slices_long(monkeypatch):
    monkeypatch.setattr(mm, "INTERPRETED", False)
    monkeypatch.setattr(mm, "sm_count", lambda: 132)
    config = mm.split_k_config(128, 4096, 4096, torch.bfloat16)
    tiles = 2 * 4096 // config["BLOCK_N"]
    assert tiles * config["SPLIT_K"] >= 132 and 4096 // config["SPLIT_K"] >= 4 * config["BLOCK_K"]
    assert mm.tile_class(128, 4096, torch.bfloat16) == "few"


def test_fp32_is_true_fp32_unless_tf32_is_asked_for():
    a, b = random_tensor((32, 64)), random_tensor((64, 32))
    assert_close(matmul(a, b), expected(a, b), dtype=torch.float32)  # 1e-5: TF32 would give ~1e-3
    assert_close(matmul(a, b, allow_tf32=True), expected(a, b), tol=3e-3)


@pytest.mark.parametrize("path", PATHS)
def test_ragged_everything(path):
    """Sizes that fill no block: the masks (or TMA's zero fill and clipped stores) carry the result."""
    M, N, K = 45, 40, 296  # 40·2 and 296·2 bytes: 16-byte aligned rows for TMA
    a, b = random_tensor((M, K), torch.float16), random_tensor((K, N), torch.float16)
    assert_close(matmul(a, b, "gelu", path=path), expected(a, b, "gelu"), dtype=torch.float16)


def test_reference_is_fp32_torch():
    a, b = random_tensor((8, 16), torch.bfloat16), random_tensor((16, 8), torch.bfloat16)
    assert reference(a, b, "gelu").dtype == torch.bfloat16
    assert_close(reference(a, b, "gelu"), expected(a, b, "gelu"), dtype=torch.bfloat16)


@pytest.mark.skipif(INTERPRETED, reason="GPU sizes: the interpreter would take minutes")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "shape", [(1, 4096, 4096), (16, 14336, 4096), (128, 4096, 14336), (1000, 3001, 1025), (2048, 2048, 2048)]
)
def test_gpu_sizes(dtype, shape):
    M, N, K = shape
    a, b = random_tensor((M, K), dtype), random_tensor((N, K), dtype).T
    assert_close(matmul(a, b, "gelu"), reference(a, b, "gelu"), dtype=dtype, baseline=apply_activation(a @ b, "gelu"))


@pytest.mark.skipif(INTERPRETED, reason="GPU sizes: the interpreter would take minutes")
@pytest.mark.parametrize("layout", ["row", "column"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 4096, 14336), (3, 1000, 3001)])
def test_gpu_gemv_sizes(shape, layout):
    M, N, K = shape
    a, b = random_tensor((M, K), torch.bfloat16), operand(K, N, torch.bfloat16, layout)
    assert_close(matmul(a, b, path="gemv"), reference(a, b), dtype=torch.bfloat16, baseline=a @ b)


# ---------------------------------------------------------------- edges and bad inputs


def test_empty_and_k_zero():
    assert matmul(random_tensor((0, 8)), random_tensor((8, 5))).shape == (0, 5)
    out = matmul(random_tensor((3, 0)), random_tensor((0, 5)), "gelu")
    assert torch.equal(out, torch.zeros(3, 5, dtype=out.dtype, device=out.device))


@pytest.mark.parametrize(
    "a, b, kwargs, error, match",
    [
        (torch.ones(2, 3, dtype=torch.int32), torch.ones(3, 2, dtype=torch.int32), {}, TypeError, "dtype"),
        (torch.ones(2, 3), torch.ones(3, 2, dtype=torch.float16), {}, TypeError, "dtypes differ"),
        (torch.ones(2, 3), torch.ones(4, 2), {}, ValueError, "inner dimensions"),
        (torch.ones(3), torch.ones(3, 2), {}, ValueError, "2-D"),
        (torch.ones(2, 3), torch.ones(3, 2), {"activation": "tanh"}, ValueError, "activation"),
        (torch.ones(2, 3), torch.ones(3, 2), {"path": "magic"}, ValueError, "path"),
        ([[1.0]], torch.ones(1, 1), {}, TypeError, "torch.Tensor"),
    ],
)
def test_bad_inputs(a, b, kwargs, error, match):
    if isinstance(a, torch.Tensor):
        a = a.to(DEVICE)
    with pytest.raises(error, match=match):
        matmul(a, b.to(DEVICE), **kwargs)


def test_wrong_device():
    elsewhere = "meta" if DEVICE == "cpu" else "cpu"  # any device that is not the kernel device
    with pytest.raises(ValueError, match="kernels run on"):
        matmul(torch.ones(2, 2, device=elsewhere), torch.ones(2, 2, device=elsewhere))


def test_dimension_over_int32_is_refused():
    huge = random_tensor((1, 1), torch.float16).expand(2**31, 1)  # stride 0: no memory behind the rows
    with pytest.raises(ValueError, match=r"2\*\*31"):
        matmul(huge, random_tensor((1, 1), torch.float16))
