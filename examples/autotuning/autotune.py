"""The tutorial matmul with its meta-parameters searched instead of fixed (tutorial 11).

* ``@triton.autotune`` times every config in :data:`CONFIGS` the first time it
  sees a new ``(M, N, K)`` (and dtype), keeps the fastest, and reuses it;
* :func:`prune_configs` drops the configs that cannot win before any is timed;
* ``@triton.heuristics`` derives ``EVEN_K`` from the arguments, so the K loop
  drops its masks when ``BLOCK_K`` divides ``K``.

Under the interpreter the autotuner cannot time anything (there is no GPU to
time on), so :data:`CONFIGS` is a single config there: ``triton.autotune``
with one config never benchmarks, it just launches.
"""

from __future__ import annotations

from academy import DEVICE, INTERPRETED

import torch
import triton
import triton.language as tl

from examples.tiled_matmul.kernel import check_inputs, grouped_tile, leaky_relu

SHARED_MEMORY_BUDGET = 160 * 1024
"""Bytes of shared memory a config may use for its pipelined A and B tiles (an H100 SM has 228 KiB)."""


# --8<-- [start:configs]
def _config(bm: int, bn: int, bk: int, warps: int, stages: int) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8}, num_warps=warps, num_stages=stages
    )


def configs_for(interpreted: bool) -> list[triton.Config]:
    """The search space: a handful of tile shapes, warps and pipeline depths."""
    if interpreted:  # (1)!
        return [_config(32, 32, 32, 4, 1)]
    return [
        _config(128, 256, 64, 8, 3),  # (2)!
        _config(256, 128, 64, 8, 3),
        _config(128, 128, 64, 8, 3),
        _config(128, 128, 32, 4, 4),
        _config(128, 64, 64, 4, 4),
        _config(64, 128, 64, 4, 4),
        _config(64, 64, 32, 4, 5),  # (3)!
        _config(32, 64, 32, 2, 5),
    ]


CONFIGS = configs_for(INTERPRETED)
# --8<-- [end:configs]


# --8<-- [start:prune]
def prune_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Drop configs that cannot win, before the autotuner times any of them.

    * a tile far larger than the matrix computes mostly padding: keep
      ``BLOCK_M ≤ max(64, next_pow2(M))`` and the same for N;
    * the pipeline keeps ``num_stages`` copies of an A tile and a B tile in
      shared memory: configs over the budget would fail to launch.

    Always returns at least one config (the smallest), as the autotuner requires.
    """
    M, N = named_args["M"], named_args["N"]
    element_size = named_args["a_ptr"].element_size()
    kept = []
    for config in configs:
        bm, bn, bk = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
        if bm > max(64, triton.next_power_of_2(M)) or bn > max(64, triton.next_power_of_2(N)):  # (1)!
            continue
        if config.num_stages * (bm * bk + bk * bn) * element_size > SHARED_MEMORY_BUDGET:  # (2)!
            continue
        kept.append(config)
    if not kept:
        kept = [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]
    return kept


# --8<-- [end:prune]


# --8<-- [start:autotuned_kernel]
def even_k(args: dict) -> bool:
    """True when every K step is full, so the K loop needs no mask."""
    return args["K"] % args["BLOCK_K"] == 0


@triton.autotune(
    configs=CONFIGS,
    key=["M", "N", "K"],  # (1)!
    prune_configs_by={"early_config_prune": prune_configs},  # (2)!
    cache_results=True,  # (3)!
)
@triton.heuristics({"EVEN_K": even_k})  # (4)!
@triton.jit
def matmul_autotuned_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
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
    ACTIVATION: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_m, pid_n = grouped_tile(pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_SIZE_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        if EVEN_K:  # (5)!
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=ks[None, :] < K - k_start, other=0.0)
            b = tl.load(b_ptrs, mask=ks[:, None] < K - k_start, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    c_mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


# --8<-- [end:autotuned_kernel]


# --8<-- [start:launcher]
def matmul_autotuned(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """``act(a @ b)`` like :func:`examples.tiled_matmul.kernel.matmul`, tile shape chosen by the autotuner.

    fp32 inputs are multiplied in true fp32 (``input_precision="ieee"``).
    """
    check_inputs(a, b, activation, 1, "ieee")
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()

    def grid(meta: dict) -> tuple[int]:  # (1)!
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    matmul_autotuned_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        ACTIVATION=activation or "",  # (2)!
    )
    return c


# --8<-- [end:launcher]


if __name__ == "__main__":
    for K in (64, 70):  # EVEN_K true, then false
        a = torch.randn(96, K, device=DEVICE, dtype=torch.float16)
        b = torch.randn(K, 80, device=DEVICE, dtype=torch.float16)
        c = matmul_autotuned(a, b, activation="relu")
        expected = torch.relu(a.double() @ b.double())
        error = ((c.double() - expected).norm() / expected.norm()).item()
        print(f"autotuned matmul on {DEVICE}, K={K}: error {error:.1e}, {len(CONFIGS)} config(s)")
        assert error < 1e-2
