"""The grouped GEMM chapter's exercise answers: an MoE MLP against a per-token loop in float64, with no
host reads, and a routing that reaches the tile bound."""

import itertools

from academy import DEVICE
from academy.testing import assert_close, random_tensor

import pytest
import torch
import torch.nn.functional as F

from examples.grouped_gemm.exercises import moe_mlp, sort_by_expert, worst_case_sizes
from examples.grouped_gemm.kernel import max_m_tiles


def moe_loop(x, router_logits, w_up, w_down, top_k):
    """The definition, one token and one chosen expert at a time."""
    probs = torch.softmax(router_logits, dim=-1)
    rows = []
    for t in range(x.shape[0]):
        gates, experts = probs[t].topk(top_k)
        gates = gates / gates.sum()
        rows.append(sum(g * (F.silu(x[t] @ w_up[e]) @ w_down[e]) for g, e in zip(gates, experts.tolist())))
    return torch.stack(rows)


def inputs(tokens=13, K=32, H=40, E=6):
    return (
        random_tensor((tokens, K), requires_grad=True),
        random_tensor((tokens, E), requires_grad=True),
        random_tensor((E, K, H), scale=0.2, requires_grad=True),
        random_tensor((E, H, K), scale=0.2, requires_grad=True),
    )


@pytest.mark.parametrize("top_k", [1, 2])
def test_moe_mlp_matches_a_per_token_loop(top_k):
    args = inputs()
    out = moe_mlp(*args, top_k)
    grad = random_tensor(tuple(out.shape))
    out.backward(grad)
    args64 = [a.detach().double().requires_grad_() for a in args]
    want = moe_loop(*args64, top_k)
    want.backward(grad.double())
    assert_close(out, want)
    for name, got, ref in zip(("x", "router_logits", "w_up", "w_down"), args, args64):
        if name == "router_logits" and top_k == 1:  # one gate, renormalised to 1: no gradient but roundoff
            assert got.grad.abs().max() < 1e-5
            continue
        assert_close(got.grad, ref.grad, tol=1e-4, name=f"d{name}")  # fp32 through softmax, SiLU, two GEMMs


def test_sorting_needs_no_host_read(monkeypatch):
    """Routing, sorting, both grouped GEMMs, the combine and the backward: no tensor is read on the host
    (``torch.bincount`` would be, on a GPU: its output's length is the largest id + 1)."""
    args = inputs()

    def refuse(self, *a, **k):
        raise AssertionError("a tensor was read on the host")

    for method in ("item", "tolist", "__bool__", "__int__", "__index__"):
        monkeypatch.setattr(torch.Tensor, method, refuse)
    moe_mlp(*args, 2).sum().backward()


def test_sort_by_expert_groups_rows_in_order():
    ids = torch.tensor([[2, 0], [1, 2], [2, 3], [0, 1]], device=DEVICE)
    order, sizes = sort_by_expert(ids, 5)
    assert sizes.tolist() == [2, 2, 3, 1, 0]
    assert ids.flatten()[order].tolist() == [0, 0, 1, 1, 2, 2, 2, 3]
    assert order.tolist()[:2] == [1, 6]  # stable: token 0's copy before token 3's


@pytest.mark.parametrize("block_m", [1, 3, 16])
def test_worst_case_sizes_reach_the_bound(block_m):
    for T, E in itertools.product((0, 1, 5, 16, 17, 100), (1, 2, 8)):
        sizes = worst_case_sizes(T, E, block_m)
        assert len(sizes) == E and sum(sizes) == T and min(sizes) >= 0
        assert sum(-(-s // block_m) for s in sizes) == max_m_tiles(T, E, block_m)
