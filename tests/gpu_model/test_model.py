"""examples.gpu_model: the spec table and the occupancy, bank, coalescing, wave and roofline models."""

import math
import xml.etree.ElementTree as ET

import pytest

from examples.gpu_model.coalescing import load_efficiency, transactions_per_warp
from examples.gpu_model.measured import intensity, measured_ceilings, measured_points
from examples.gpu_model.occupancy import occupancy
from examples.gpu_model.roofline import Point, Roof, attainable, ridge_point, roofline_svg
from examples.gpu_model.shared_memory import bank_conflict_ways, column_read_ways, shared_access_ways, swizzle
from examples.gpu_model.specs import GPUS, gpu_for, hardware_table_markdown
from examples.gpu_model.waves import waves

# ------------------------------------------------------------------ spec table


def test_every_gpu_has_a_source_and_consistent_limits():
    assert set(GPUS) == {"A100", "H100", "H200", "B200"}
    for gpu in GPUS.values():
        assert "NVIDIA" in gpu.source and "http" not in gpu.source
        assert gpu.registers_per_sm == 65536 and gpu.register_file_kb == 256
        assert gpu.max_warps_per_sm == 64 and gpu.max_registers_per_thread == 255
        assert gpu.max_smem_per_block_kb <= gpu.max_smem_per_sm_kb < gpu.l1_smem_per_sm_kb


def test_sm_counts():
    assert [GPUS[k].sms for k in ("A100", "H100", "H200", "B200")] == [108, 132, 132, 148]


def test_derived_bandwidths_follow_from_the_clock():
    # 128 B per clock per SM for shared memory; FP32 FMA lanes x 3 operands x 4 B for registers
    a100, h100 = GPUS["A100"], GPUS["H100"]
    assert a100.smem_tbps == pytest.approx(128 * 108 * 1.41e9 / 1e12)
    assert h100.register_tbps == pytest.approx(128 * 12 * 132 * 1.98e9 / 1e12)
    # the FP32 rate is 2 FLOP per lane per clock: the clock and the rate agree
    for gpu in (a100, h100, GPUS["H200"]):
        assert 2 * gpu.fp32_lanes_per_sm * gpu.sms * gpu.boost_clock_mhz * 1e6 / 1e12 == pytest.approx(
            gpu.fp32_tflops, rel=0.01
        )
    assert GPUS["B200"].smem_tbps is None  # no published clock: nothing derived


def test_gpu_for_device_names():
    assert gpu_for("NVIDIA H100 80GB HBM3") is GPUS["H100"]
    assert gpu_for("NVIDIA H200") is GPUS["H200"]
    with pytest.raises(KeyError, match="no spec sheet"):
        gpu_for("Some Other GPU")


def test_hardware_table_has_a_column_and_a_source_per_gpu():
    text = hardware_table_markdown()
    header = text.splitlines()[0]
    assert header.count("|") == 6 and "[4]" in header
    for i, gpu in enumerate(GPUS.values(), start=1):
        assert f"[{i}] {gpu.name}: {gpu.source}." in text
    assert "| SMs | 108 | 132 | 132 | 148 |" in text


# ------------------------------------------------------------------ occupancy


@pytest.mark.parametrize(
    "registers, warps, limiter",
    [(32, 64, "warps"), (64, 32, "registers"), (128, 16, "registers"), (255, 8, "registers")],
)
def test_register_limited_occupancy_h100(registers, warps, limiter):
    # 65,536 registers / 64 warps / 32 threads = 32 registers per thread for a full SM
    occ = occupancy(registers, 256, gpu="H100")
    assert occ.warps_per_sm == warps and occ.limiter == limiter
    assert occ.fraction == warps / 64


def test_registers_are_allocated_per_warp_in_chunks_of_256():
    # 33 registers -> 1,056 per warp -> rounded to 1,280 -> 51 warps -> 6 blocks of 8 warps
    occ = occupancy(33, 256, gpu="H100")
    assert occ.limits["registers"] == 6 and occ.warps_per_sm == 48


def test_shared_memory_limit():
    # 100 KB + 1 KB reserved per block, 228 KB per SM: two blocks
    occ = occupancy(32, 256, 100 * 1024, gpu="H100")
    assert occ.blocks_per_sm == 2 and occ.limiter == "shared memory"
    # the same kernel on an A100 (164 KB per SM) fits one
    assert occupancy(32, 256, 100 * 1024, gpu="A100").blocks_per_sm == 1


def test_block_slots_limit_tiny_blocks():
    occ = occupancy(16, 32, gpu="H100")  # 1 warp per block, at most 32 blocks
    assert occ.limiter == "blocks" and occ.warps_per_sm == 32 and occ.fraction == 0.5


def test_occupancy_rejects_impossible_kernels():
    with pytest.raises(ValueError, match="registers_per_thread"):
        occupancy(256, 128)
    with pytest.raises(ValueError, match="threads_per_block"):
        occupancy(32, 2048)
    with pytest.raises(ValueError, match="shared_mem_per_block"):
        occupancy(32, 128, 300 * 1024)


# ------------------------------------------------------------------ shared memory banks


@pytest.mark.parametrize(
    "stride, ways", [(1, 1), (2, 2), (3, 1), (4, 4), (8, 8), (16, 16), (32, 32), (33, 1), (64, 32)]
)
def test_bank_conflict_ways(stride, ways):
    assert bank_conflict_ways(stride) == ways == math.gcd(stride, 32)


def test_same_word_is_a_broadcast_not_a_conflict():
    assert bank_conflict_ways(0) == 1
    assert shared_access_ways([0] * 16 + [128] * 16) == 2  # two words of bank 0
    assert shared_access_ways([0, 1, 2, 3]) == 1  # bytes of one word


def test_column_reads_padding_and_swizzle():
    assert column_read_ways(32) == 32
    assert column_read_ways(33) == 1
    assert column_read_ways(34) == 2
    assert all(column_read_ways(32, swizzled=True, col=c) == 1 for c in range(32))
    # the swizzle permutes each row: no two columns of a row collide
    assert all(sorted(swizzle(r, c) for c in range(32)) == list(range(32)) for r in range(32))


# ------------------------------------------------------------------ coalescing


@pytest.mark.parametrize(
    "stride, element, offset, transactions",
    [
        (4, 4, 0, 1),  # 32 consecutive floats: one 128-byte line
        (4, 4, 4, 2),  # shifted by one float: straddles two lines
        (8, 4, 0, 2),  # every other float
        (16, 16, 0, 4),  # float4 per thread: 512 bytes, 4 lines, all used
        (128, 4, 0, 32),  # one float per line: 32 lines
        (4096, 4, 0, 32),  # reading a column of a row-major matrix
        (2, 2, 0, 1),  # 32 consecutive bf16 values: half a line
    ],
)
def test_transactions_per_warp(stride, element, offset, transactions):
    assert transactions_per_warp(stride, element, offset) == transactions


def test_load_efficiency():
    assert load_efficiency(4) == 1.0
    assert load_efficiency(128) == 4 / 128
    assert load_efficiency(16, 16) == 1.0


# ------------------------------------------------------------------ waves


def test_wave_quantisation_160_blocks_on_148_sms():
    w = waves(160, 148)
    assert (w.count, w.full_waves, w.tail_blocks) == (2, 1, 12)
    assert w.last_wave_fill == 12 / 148
    assert w.efficiency == 160 / 296


def test_exact_waves_and_several_blocks_per_sm():
    assert waves(264, 132, 2).count == 1 and waves(264, 132, 2).efficiency == 1.0
    assert waves(133, 132).count == 2
    with pytest.raises(ValueError):
        waves(0, 132)


# ------------------------------------------------------------------ roofline


def test_ridge_point_and_attainable():
    assert ridge_point(1000, 4000) == 250  # 1e15 FLOP/s over 4e12 B/s
    assert attainable(10, 1000, 4000) == 40  # memory bound: 10 FLOP/B x 4 TB/s
    assert attainable(1000, 1000, 4000) == 1000  # compute bound


def test_measured_ceilings_come_from_a_results_file():
    from academy.bench.results import load

    found = measured_ceilings("h100")
    results = load(found.path)
    assert found.path.parent.name == "results" and found.path.name == "h100.json"
    assert found.copy_gbps == results.ceilings.copy_gbps
    assert found.ridge_point == pytest.approx(results.ceilings.matmul_tflops * 1e3 / results.ceilings.copy_gbps)
    with pytest.raises(FileNotFoundError):
        measured_ceilings("no-such-gpu")


def test_intensity_of_the_measured_kernels():
    # vector add in fp32: one FLOP per 12 bytes; softmax forward in bf16: 5 FLOP per 4 bytes
    assert intensity("vector_add", "fwd", {"n": 1000}, 12_000) == 1 / 12
    assert intensity("fused_softmax", "fwd", {"M": 10, "N": 100}, 2 * 2 * 1000) == 1.25


def test_measured_points_agree_with_the_rows():
    points = measured_points("h100")
    groups = {p.group for p in points}
    assert {"vector_add (fwd)", "fused_softmax (fwd)"} <= groups
    ceilings = measured_ceilings("h100")
    for p in points:
        # a measured memory-bound kernel sits on or under the bandwidth roof (small slack for timing noise)
        assert p.tflops <= attainable(p.intensity, ceilings.matmul_tflops, ceilings.copy_gbps) * 1.1


def test_roofline_svg_is_well_formed():
    svg = roofline_svg(
        3000,
        [Roof("bf16 matmul", 700), Roof("fp32 spec <sheet>", 67, dashed=True)],
        [Point("a & b", 0.1, 0.25, "vector_add"), Point("c", 1.25, 3.0, "softmax")],
        title="test <roofline>",
    )
    root = ET.fromstring(svg)
    assert root.tag == "div"
    inner = root.find("{http://www.w3.org/2000/svg}svg")
    assert inner is not None and "ridge point 233 FLOP/byte" in inner.get("aria-label")
    assert len(inner.findall(".//{http://www.w3.org/2000/svg}circle")) == 4  # 2 points + 2 legend dots
    with pytest.raises(ValueError):
        roofline_svg(3000, [])


def test_roofline_svg_of_the_committed_results_is_well_formed():
    ceilings = measured_ceilings("h100")
    svg = roofline_svg(ceilings.copy_gbps, [Roof("matmul", ceilings.matmul_tflops)], measured_points("h100"))
    ET.fromstring(svg)
