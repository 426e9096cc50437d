"""Answers to the grouped GEMM chapter's exercises.

* ``moe_mlp(x, router_logits, w_up, w_down, top_k)``: a whole mixture-of-experts
  MLP around :func:`~examples.grouped_gemm.kernel.grouped_matmul`: route each
  token to its top-k experts, sort the copies by expert, two grouped GEMMs with
  a SiLU between them, and the gate-weighted sum back per token, with no host
  synchronisation anywhere.
* ``worst_case_sizes(T, E, block_m)``: a routing that needs exactly
  ``max_m_tiles(T, E, block_m)`` row tiles, so the launcher's bound cannot be
  lowered.

``tests/grouped_gemm/test_exercises.py`` checks both (the first against a
per-token loop in float64, with every host read refused).
"""

from __future__ import annotations

import torch

from examples.grouped_gemm.kernel import grouped_matmul


# --8<-- [start:moe_mlp]
def sort_by_expert(expert_ids: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For (tokens, k) expert ids: ``order`` (each sorted row's index into ``expert_ids.flatten()``)
    and ``group_sizes`` (rows per expert), both computed on the device."""
    flat = expert_ids.flatten()
    order = torch.argsort(flat, stable=True)  # (1)!
    group_sizes = torch.zeros(num_experts, dtype=torch.int64, device=flat.device)
    group_sizes.index_add_(0, flat, torch.ones_like(flat))  # (2)!
    return order, group_sizes


def moe_mlp(
    x: torch.Tensor, router_logits: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor, top_k: int
) -> torch.Tensor:
    """A mixture-of-experts MLP: ``Σ_j p_j · silu(x · w_up[e_j]) · w_down[e_j]`` over each token's top-k
    experts ``e_j``, ``p`` the softmax of their router logits; x (tokens, K), router_logits
    (tokens, E), w_up (E, K, H), w_down (E, H, K)."""
    tokens, k = x.shape[0], top_k
    gates, expert_ids = torch.softmax(router_logits.float(), dim=-1).topk(k, dim=-1)
    gates = gates / gates.sum(dim=-1, keepdim=True)  # renormalised over the chosen experts
    order, group_sizes = sort_by_expert(expert_ids, w_up.shape[0])
    rows = x[order // k]  # (3)!
    hidden = torch.nn.functional.silu(grouped_matmul(rows, w_up, group_sizes))
    out = grouped_matmul(hidden, w_down, group_sizes)
    unsorted = torch.zeros_like(out).index_copy(0, order, out)  # (4)!
    return (unsorted.view(tokens, k, -1) * gates.to(out.dtype).unsqueeze(-1)).sum(dim=1)


# --8<-- [end:moe_mlp]


# --8<-- [start:worst_case]
def worst_case_sizes(T: int, E: int, block_m: int) -> list[int]:
    """Group sizes that need ``max_m_tiles(T, E, block_m)`` row tiles: n = min(E, T) non-empty groups,
    n − 1 of a single row (one tile each, block_m − 1 rows of it padding) and one of the rest."""
    n = min(E, T)
    if n == 0:
        return [0] * E
    return [T - (n - 1)] + [1] * (n - 1) + [0] * (E - n)


# --8<-- [end:worst_case]
