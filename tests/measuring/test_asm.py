"""examples.measuring.asm: the PTX/SASS text helpers on small hand-written listings, and the listing files."""

import json

from academy import INTERPRETED

import pytest

from examples.measuring import asm

# A cut-down PTX listing of a one-load, one-store elementwise kernel, written
# for this test in the shape ptxas input takes (comments and blank lines included).
PTX = """
//
// Generated for a test
//
.version 8.4
.target sm_90a
.address_size 64

.visible .entry scale_kernel(
\t.param .u64 scale_kernel_param_0,
\t.param .u64 scale_kernel_param_1
)
{
\t.reg .pred \t%p<3>;
\t.reg .b32 \t%r<21>;
\t.reg .f32 \t%f<9>;
\t.reg .b64 \t%rd<6>;

\tld.param.u64 \t%rd3, [scale_kernel_param_0];
\tmov.u32 \t%r9, %ctaid.x;   // which program
\tmov.u32 \t%r10, %tid.x;
\tshl.b32 \t%r11, %r9, 10;
\t// begin inline asm
\tmov.u32 %r1, 0x0;
\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
\t// end inline asm
\tld.global.b16 \t%rs1, [%rd4];
\tmul.f32 \t%f2, %f1, 0f40000000;
\t@%p2 st.global.v2.f32 [ %rd2 + 0 ], { %f2, %f3 };
\tret;
}
"""

# Two cuobjdump -sass lines (address, instruction, encoding) and Triton's reformatted style.
CUOBJDUMP_SASS = """
\tcode for sm_90a
\t\tFunction : scale_kernel
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                /* 0x00000a00ff017b82 */
                                                                          /* 0x000fe40000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;                    /* 0x0000000000007919 */
                                                                          /* 0x000e220000002100 */
        /*0020*/                   LDG.E.128 R4, desc[UR4][R2.64] ;      /* 0x0000000402047981 */
                                                                          /* 0x000ea4000c1e1d00 */
        /*0030*/                   FMUL R4, R4, 2 ;                      /* 0x4000000004047820 */
                                                                          /* 0x004fe20000400000 */
        /*0040*/                   STG.E.128 desc[UR4][R2.64], R4 ;      /* 0x0000000402007986 */
                                                                          /* 0x000fe2000c101d04 */
        /*0050*/                   EXIT ;                                /* 0x000000000000794d */
                                                                          /* 0x000fea0003800000 */
"""

TRITON_SASS = """Function:scale_kernel
--:-:0:-:1\tS2R R0, SR_TID.X;
04:-:-:-:1\tFMUL R4, R4, 2;
LBB0:
--:-:-:-:5\tEXIT;
"""


def test_interesting_lines_keep_registers_memory_and_indices():
    lines = asm.interesting_ptx_lines(PTX)
    assert lines == [
        ".reg .pred \t%p<3>;",
        ".reg .b32 \t%r<21>;",
        ".reg .f32 \t%f<9>;",
        ".reg .b64 \t%rd<6>;",
        "mov.u32 \t%r9, %ctaid.x;",  # the comment is gone
        "mov.u32 \t%r10, %tid.x;",
        "@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];",
        "ld.global.b16 \t%rs1, [%rd4];",
        "@%p2 st.global.v2.f32 [ %rd2 + 0 ], { %f2, %f3 };",
    ]


def test_global_accesses_read_vector_width_and_predicate():
    accesses = asm.global_accesses(PTX)
    assert [(a.op, a.vector, a.bits, a.predicated, a.bytes) for a in accesses] == [
        ("ld", 4, 32, True, 16),
        ("ld", 1, 16, False, 2),
        ("st", 2, 32, True, 8),
    ]


def test_global_access_with_cache_hints():
    (access,) = asm.global_accesses("@%p1 ld.global.L1::evict_last.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];")
    assert (access.op, access.vector, access.bits) == ("ld", 4, 32)


def test_register_declarations():
    assert asm.register_declarations(PTX) == {"%p": 3, "%r": 21, "%f": 9, "%rd": 6}
    assert asm.register_declarations("// .reg .f32 %f<99>;") == {}  # commented out


def test_sass_from_cuobjdump():
    assert asm.sass_instructions(CUOBJDUMP_SASS) == [
        "LDC R1, c[0x0][0x28]",
        "S2R R0, SR_TID.X",
        "LDG.E.128 R4, desc[UR4][R2.64]",
        "FMUL R4, R4, 2",
        "STG.E.128 desc[UR4][R2.64], R4",
        "EXIT",
    ]
    assert asm.sass_excerpt(CUOBJDUMP_SASS, limit=3) == [
        "S2R R0, SR_TID.X",
        "LDG.E.128 R4, desc[UR4][R2.64]",
        "FMUL R4, R4, 2",
    ]


def test_sass_in_tritons_format():
    assert asm.sass_instructions(TRITON_SASS) == ["S2R R0, SR_TID.X", "FMUL R4, R4, 2", "EXIT"]


def test_record_is_json_ready():
    listing = asm.KernelAsm(
        name="scale_kernel", ptx=PTX, sass=CUOBJDUMP_SASS, n_regs=18, n_spills=0, num_warps=4, shared_bytes=0
    )
    record = asm.asm_record(
        listing, slug="demo", kernel="scale_kernel", gpu="NVIDIA H100 80GB HBM3", triton_version="3.6.0"
    )
    again = json.loads(json.dumps(record))
    assert again["n_regs"] == 18 and again["n_spills"] == 0
    assert again["ptx_global_accesses"][0] == {"op": "ld", "vector": 4, "bits": 32, "predicated": True}
    assert again["sass"][0] == "S2R R0, SR_TID.X"
    assert again["sass_instruction_count"] == 6


def test_missing_sass_is_none():
    listing = asm.KernelAsm(name="k", ptx=PTX, sass=None, n_regs=None, n_spills=None, num_warps=None, shared_bytes=None)
    record = asm.asm_record(listing, slug="demo", kernel="k", gpu="g", triton_version="t")
    assert record["sass"] is None and record["sass_instruction_count"] is None


def test_listing_files_stay_out_of_results():
    """results/*.json are read as benchmark results: listings must live elsewhere."""
    assert asm.asm_dir("vector_add").name == "asm"
    assert asm.asm_dir("vector_add").parent.name == "vector_add"
    for path in asm.asm_files("vector_add"):
        assert {"gpu", "kernel", "n_regs", "ptx_lines"} <= set(json.loads(path.read_text()))


@pytest.mark.skipif(not INTERPRETED, reason="checks the CPU behaviour")
def test_compiling_needs_a_gpu():
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        asm.dump("vector_add", "add_kernel", "/nonexistent")


@pytest.mark.skipif(INTERPRETED, reason="needs a GPU")
def test_compile_kernel_on_gpu():
    import torch

    from examples.vector_add.kernel import add_kernel

    x = torch.randn(4096, device="cuda")
    listing = asm.compile_kernel(add_kernel, x, x, torch.empty_like(x), 4096, 1, 1, BLOCK_SIZE=1024, grid=(4,))
    assert listing.n_regs and listing.n_spills == 0
    assert any(a.op == "ld" for a in asm.global_accesses(listing.ptx))
