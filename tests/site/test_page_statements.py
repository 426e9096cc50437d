"""Statements on the pages that were once wrong, pinned to what they rest on.

Each test names a page, the statement it makes, and checks it against its
source: the page's own formula, the installed Triton, the committed results,
or a kernel run under the interpreter. Where the source is a document we do
not ship (a published README's table), its figures are written out here,
quoted from that document, and the page's arithmetic is checked against them.
The old, wrong wordings are listed too, so that they cannot come back.
"""

from __future__ import annotations

import json
import math
import re

from academy import DEVICE
from academy.chapters import DOCS_DIR, EXAMPLES_DIR
from academy.testing import assert_close, random_tensor

import pytest
import torch
import torch.nn.functional as F


def page(rel: str) -> str:
    """A page's source with runs of whitespace (line breaks included) collapsed to one space."""
    return re.sub(r"\s+", " ", (DOCS_DIR / rel).read_text())


def results(slug: str) -> dict:
    return json.loads((EXAMPLES_DIR / slug / "results" / "h100.json").read_text())


# ----------------------------------------------------------------------------- wordings

WRONG = [
    ("kernels/matmul.md", "intensity 1 in fp16", "the naive kernel does 2K FLOPs on 4K bytes: 0.5 FLOP/byte"),
    ("kernels/matmul.md", "near the ridge", "I = 120 at M = 128 is under half the ridge"),
    ("kernels/matmul.md", "needs every dimension ≥ 16", "tl.dot asks M, N >= 1 and K >= 16"),
    ("kernels/matmul.md", "(and M, N ≥ 16)", "tl.dot asks M, N >= 1 and K >= 16"),
    ("kernels/quantized_matmul.md", "the smallest `tl.dot` tile", "tl.dot asks M, N >= 1 and K >= 16"),
    ("contributing.md", "(`tl.dot`: 16) rows", "tl.dot asks M, N >= 1 and K >= 16"),
    (
        "kernels/flash_attention.md",
        "reads both operands from shared memory",
        "wgmma's left operand may be in registers",
    ),
    (
        "kernels/cross_entropy.md",
        "a hazard the seeds' kernel had",
        "that kernel cast to int64; the layer-norm one did not",
    ),
    ("kernels/swiglu.md", r"\infty/\infty", "the quotient-rule numerator is inf - inf"),
    ("kernels/swiglu.md", "stays near that \\(5/3\\)", "the fwd+bwd ratio follows 14/8"),
    ("kernels/layer_norm.md", "within a few standard deviations", "up to sqrt(N-1) standard deviations"),
    ("kernels/layer_norm.md", "were host-timed", "the 2022 tutorial used CUDA events (do_bench)"),
    ("tutorials/layer_norm_locks.py", "We do not copy those", "the chapter quotes the 2022 figures"),
    (
        "tutorials/layer_norm_locks.py",
        "so gradients did not accumulate",
        "grad_to_none=[x] left dW and dB accumulating",
    ),
    ("kernels/fused_softmax.md", "overlaps the start of the next", "kernels in one stream do not overlap"),
    ("kernels/vector_add.md", "overlaps the start of the next", "kernels in one stream do not overlap"),
    ("getting-started.md", "default wheels for CUDA 12.x", "cu130 wheels are CUDA 13.0"),
    ("kernels/rms_norm.md", "the summary and the table disagree", "the table's column is against 'Native'"),
    ("kernels/quantized_matmul.md", "a quarter too high", "the timed loop includes the compiling call"),
]


@pytest.mark.parametrize("rel, wrong, why", WRONG, ids=[f"{r}: {w}" for r, w, _ in WRONG])
def test_wrong_wording_is_gone(rel, wrong, why):
    assert wrong not in page(rel), f"{rel} says {wrong!r} again: {why}"


# ----------------------------------------------------------------------------- matmul


def intensity(m: int, n: int, k: int, s: int = 2) -> float:
    """The matmul page's formula: 2MNK FLOPs over (MK + KN + MN) s bytes."""
    return 2 * m * n * k / ((m * k + k * n + m * n) * s)


def test_naive_kernel_intensity_is_half_a_flop_per_byte():
    k, s = 4096, 2
    flops, bytes_read = 2 * k, 2 * k * s  # one output: a row of A and a column of B
    assert flops / bytes_read == 0.5
    assert "$2K / 4K = 0.5$ FLOP/byte" in page("kernels/matmul.md")


def test_m128_prefill_is_under_half_the_ridge():
    i = intensity(128, 4096, 4096)
    assert 119 < i < 121  # the table's "≈ 120"
    datasheet_ridge = 990e12 / 3.35e12  # the page's datasheet figures
    ceilings = results("matmul")["ceilings"]
    measured_ridge = ceilings["matmul_tflops"] * 1e12 / (ceilings["copy_gbps"] * 1e9)
    assert i < datasheet_ridge / 2 and i < measured_ridge / 2
    assert "| $\\approx 120$ | memory, at under half the ridge |" in page("kernels/matmul.md")


def test_tl_dot_asks_only_k_to_be_16_for_16_bit_operands():
    """The installed Triton's own limit, the one its assertion message prints."""
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import min_dot_size

    limits = min_dot_size(GPUTarget("cuda", 90, 32))
    assert limits(tl.float16, tl.float16) == (1, 1, 16)
    assert limits(tl.bfloat16, tl.bfloat16) == (1, 1, 16)
    assert "`Input shapes should have M >= 1, N >= 1 and K >= 16`" in page("kernels/matmul.md")


# ----------------------------------------------------------------------------- swiglu


def test_silu_quotient_rule_numerator_is_inf_minus_inf():
    x = torch.tensor([-100.0])
    e = torch.exp(-x)  # inf in fp32
    assert torch.isinf(e).all()
    assert torch.isnan(1 + e + x * e).all()  # inf + (-inf)
    assert torch.isfinite(x * torch.sigmoid(x)).all()  # the product form
    assert "\\(\\infty - \\infty\\), NaN" in page("kernels/swiglu.md")


def test_swiglu_ratios_to_eager_follow_the_pass_counts():
    rows = results("swiglu")["rows"]
    by_case: dict[tuple, dict[str, float]] = {}
    for r in rows:
        by_case.setdefault((r["mode"], str(r["params"]), r["dtype"]), {})[r["provider"]] = r["ms"]
    passes = {"fwd": 5 / 3, "fwd+bwd": 14 / 8}  # eager's passes over ours
    for (mode, _, _), ms in by_case.items():
        assert abs(ms["eager"] / ms["academy"] / passes[mode] - 1) < 0.02
    assert "\\(14/8 = 1.75\\)" in page("kernels/swiglu.md")


# ----------------------------------------------------------------------------- layer norm


def test_no_value_is_further_than_sqrt_n_minus_1_sigmas():
    """Samuelson's bound, reached by a row of N - 1 equal values and one outlier."""
    n = 1000
    x = torch.zeros(n, dtype=torch.float64)
    x[0] = 1.0
    sigma = x.std(unbiased=False)
    assert torch.isclose((x[0] - x.mean()) / sigma, torch.tensor(math.sqrt(n - 1), dtype=torch.float64))
    assert "\\(\\sqrt{N-1}\\) standard deviations" in page("kernels/layer_norm.md")


# ----------------------------------------------------------------------------- ceilings


L2_BYTES = 50 * 2**20  # the H100's L2


def test_rows_above_the_copy_ceiling_do_not_fit_in_l2():
    above = []
    for path in sorted(EXAMPLES_DIR.glob("*/results/h100.json")):
        data = json.loads(path.read_text())
        for r in data["rows"]:
            if r.get("metric", data.get("metric")) == "bandwidth" and r["fraction_of_ceiling"] > 1:
                above.append((path.parts[-3], r))
    assert above, "no row above the copy ceiling: the performance page's section can go"
    assert all(r["work"] > 5 * L2_BYTES for _, r in above)
    text = page("performance.md")
    chapters = {slug for slug, _ in above}
    numbers = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
    low, high = (f"{100 * f(r['fraction_of_ceiling'] for _, r in above):.1f}%" for f in (min, max))
    assert f"{len(above)} rows of {numbers.get(len(chapters), len(chapters))} chapters" in text
    assert f"from {low} to {high}" in text


def test_row_sum_reads_faster_than_the_copy_it_is_measured_against():
    data = results("row_sum")
    biggest = max(data["rows"], key=lambda r: (r["work"], r["rate"]))
    text = page("performance.md")
    assert f"{100 * biggest['fraction_of_ceiling']:.1f}%" in text
    assert f"{biggest['rate']:,.0f} GB/s" in text
    assert f"{data['ceilings']['copy_gbps']:,.0f} GB/s copy" in text


# ----------------------------------------------------------------------------- quoted tables

# The RMSNorm table of the Triton + CUDA GPU Kernels README (A100 80GB, fp16, batch 128):
# hidden size -> (PyTorch ms, Native ms, Triton ms, its printed speed-up).
RMSNORM_README = {1024: (0.033, 0.039, 0.007, 5.18), 2048: (0.032, 0.041, 0.007, 5.50),
                  4096: (0.039, 0.049, 0.008, 5.84), 8192: (0.036, 0.051, 0.011, 4.74)}  # fmt: skip


def test_rms_norm_readme_summary_is_its_pytorch_column():
    vs_pytorch = [p / t for p, _, t, _ in RMSNORM_README.values()]
    vs_native = [n / t for _, n, t, _ in RMSNORM_README.values()]
    printed = [s for *_, s in RMSNORM_README.values()]
    assert f"{min(vs_pytorch):.2f}" == "3.27" and f"{max(vs_pytorch):.2f}" == "4.88"  # the summary's 3.3-4.9
    assert all(abs(n / s - 1) < 0.1 for n, s in zip(vs_native, printed))  # the column is against Native
    assert "$3.27$–$4.88\\times$" in page("kernels/rms_norm.md")


# The CUDA-softmax table of the same README: hidden size -> (Triton ms, CUDA v2 ms), and
# the Triton ms of its Triton-softmax table, the same kernel at the same sizes.
SOFTMAX_README = {128: (0.0066, 0.0069), 512: (0.0066, 0.0075), 1024: (0.0096, 0.0072),
                  2048: (0.0149, 0.0081), 4096: (0.0084, 0.0086), 8192: (0.0100, 0.0100)}  # fmt: skip
SOFTMAX_README_TRITON = {128: 0.0064, 512: 0.0070, 1024: 0.0066, 2048: 0.0072, 4096: 0.0078, 8192: 0.0096}


def test_softmax_readme_range_comes_from_its_triton_timings_moving():
    ratios = {h: t / v2 for h, (t, v2) in SOFTMAX_README.items()}
    assert f"{min(ratios.values()):.2f}" == "0.88" and f"{max(ratios.values()):.2f}" == "1.84"  # printed 1.85
    spread = SOFTMAX_README[2048][0] / SOFTMAX_README_TRITON[2048]
    assert spread > 2  # one kernel, one size, two tables: run-to-run noise
    text = page("kernels/fused_softmax.md")
    assert "run-to-run noise" in text and "$0.0072$ ms and $0.0149$ ms" in text


# ----------------------------------------------------------------------------- expanded gradients


def _expanded_dy_grads(op, reference, x, params):
    """Gradients of ``y.sum(0) @ v``: autograd hands the backward a dy of strides (0, 1)."""
    v = random_tensor(x.shape[-1], device=x.device)
    out = []
    for fn in (op, reference):
        leaves = [t.detach().clone().requires_grad_() for t in (x, *params)]
        y = fn(*leaves)
        (y.sum(0) @ v).backward()
        out.append([t.grad for t in leaves])
    return out


def test_an_expanded_upstream_gradient_is_read_in_place():
    from examples.norms.launch import as_rows

    dy = torch.ones(7, device=DEVICE).expand(5, 7)
    assert as_rows(dy).stride() == (0, 1) and as_rows(dy).data_ptr() == dy.data_ptr()  # no copy
    assert "strides \\((0, 1)\\)" in page("kernels/layer_norm.md")


@pytest.mark.parametrize("slug", ["layer_norm", "rms_norm", "fused_softmax"])
def test_backward_with_an_expanded_upstream_gradient(slug):
    n = 40
    x = random_tensor((6, n))
    if slug == "layer_norm":
        from examples.layer_norm.kernel import layer_norm as op

        params = (random_tensor(n, offset=1.0), random_tensor(n))

        def reference(x, w, b):
            return F.layer_norm(x, (n,), w, b, 1e-5)
    elif slug == "rms_norm":
        from examples.rms_norm.kernel import rms_norm as op

        params = (random_tensor(n, offset=1.0),)

        def reference(x, w):
            return F.rms_norm(x, (n,), w, 1e-6)
    else:
        from examples.fused_softmax.kernel import softmax as op

        params = ()

        def reference(x):
            return torch.softmax(x, dim=-1)

    got, expected = _expanded_dy_grads(op, reference, x, params)
    for name, g, e in zip(("dx", "dw", "db"), got, expected):
        assert_close(g, e, dtype=torch.float32, name=name)
