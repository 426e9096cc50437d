"""Answers to the exercises of the autotuning tutorial (docs/tutorials/autotuning.py).

* ``matmul_bucketed(a, b)``: the autotuner keyed on ``M`` rounded up to a
  power of two, so 1000 and 1024 rows share one tuning run;
* ``shared_memory_bytes(config, dtype)``: the shared memory a config's
  software pipeline holds, and ``configs_that_fit`` a budget.

``tests/autotuning/test_answers.py`` checks them against float64 PyTorch.
"""

from __future__ import annotations

from academy import INTERPRETED

import torch
import triton
import triton.language as tl

from examples.autotuning.autotune import configs_for, prune_configs
from examples.tiled_matmul.kernel import check_inputs, grouped_tile


# --8<-- [start:matmul_bucketed]
@triton.autotune(
    configs=configs_for(INTERPRETED),
    key=["M_BUCKET", "N", "K"],  # M itself is not in the key
    prune_configs_by={"early_config_prune": prune_configs},
)
@triton.jit
def matmul_bucketed_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    M_BUCKET,  # next power of two ≥ M: only the autotuner reads it
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_SIZE_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k_start, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k_start, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


def matmul_bucketed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b``, autotuned once per (power-of-two bucket of M, N, K, dtype)."""
    check_inputs(a, b, None, 8, "ieee")
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    matmul_bucketed_kernel[lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)](
        a,
        b,
        c,
        M,
        N,
        K,
        triton.next_power_of_2(M),
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
    )
    return c


# --8<-- [end:matmul_bucketed]


# --8<-- [start:shared_memory_bytes]
def shared_memory_bytes(config: triton.Config, dtype: torch.dtype) -> int:
    """Shared memory a config's software pipeline holds: one A tile and one B tile per stage."""
    bm, bn, bk = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    element_size = torch.empty((), dtype=dtype).element_size()
    return config.num_stages * (bm * bk + bk * bn) * element_size


def configs_that_fit(configs: list[triton.Config], dtype: torch.dtype, budget: int) -> list[triton.Config]:
    return [c for c in configs if shared_memory_bytes(c, dtype) <= budget]


# --8<-- [end:shared_memory_bytes]
