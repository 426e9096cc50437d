"""The benchmark's routing is deterministic and shaped as its docstring says, and its peers compute the op."""

from academy import DEVICE
from academy.bench.spec import Case
from academy.testing import assert_close, random_tensor

import pytest
import torch

from examples.grouped_gemm.bench import (
    MAX_PADDING,
    SPEC,
    cublas_loop,
    padded_bmm,
    routed_group_sizes,
    torch_grouped_mm,
)


def test_routing_is_the_same_every_time_and_sums_to_t():
    for skewed in (False, True):
        first = routed_group_sizes(4096, 256, 8, skewed, seed=7)
        assert torch.equal(first, routed_group_sizes(4096, 256, 8, skewed, seed=7))
        assert first.sum() == 4096 * 8


def test_skewed_routing_has_a_heavy_expert_and_empty_ones():
    sizes = routed_group_sizes(4096, 8, 2, True, seed=0)
    assert sizes[0] >= 2048  # half the tokens, and its share of the rest
    assert sizes[6:].tolist() == [0, 0]  # the last quarter of the experts gets nothing
    balanced = routed_group_sizes(4096, 8, 2, False, seed=0)
    assert balanced.min() > 0.8 * 1024 and balanced.max() < 1.2 * 1024


def test_every_case_is_a_real_models_shape():
    cases = list(SPEC.cases())
    assert len(cases) <= 16  # eight shapes, forward and forward+backward
    for case in cases:
        p = case.params
        assert p["T"] == 4096 * p["top_k"] and case.label.startswith(case.sweep)


@pytest.mark.parametrize("peer", [cublas_loop, padded_bmm])
def test_peers_compute_the_grouped_product(peer):
    sizes = [5, 0, 1, 9]
    x, w = random_tensor((15, 16), requires_grad=True), random_tensor((4, 16, 24), requires_grad=True)
    y = peer(x, w, torch.tensor(sizes, device=DEVICE))
    y.backward(torch.ones_like(y))
    assert_close(y, torch.cat([rows.double() @ w[e].double() for e, rows in enumerate(x.split(sizes))]))
    assert not w.grad[1].count_nonzero()


def test_padded_peer_refuses_a_batch_of_mostly_padding():
    sizes = torch.tensor([MAX_PADDING + 1] + [0] * 8, device=DEVICE)  # 9 groups of 9 rows for 9 rows
    x, w = random_tensor((MAX_PADDING + 1, 4)), random_tensor((9, 4, 4))
    with pytest.raises(ValueError, match="padding 9 groups to 9 rows"):
        padded_bmm(x, w, sizes)


def test_grouped_mm_peer_where_torch_has_it():
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("this torch has no _grouped_mm")
    sizes = [5, 0, 1, 10]
    x, w = random_tensor((16, 16), torch.bfloat16), random_tensor((4, 16, 24), torch.bfloat16)
    try:
        y = torch_grouped_mm(x, w, torch.tensor(sizes, device=DEVICE))
    except RuntimeError as err:  # e.g. a GPU older than Hopper
        pytest.skip(f"torch._grouped_mm refuses here: {err}")
    assert_close(y, torch.cat([rows.double() @ w[e].double() for e, rows in enumerate(x.split(sizes))]))


def test_inputs_follow_the_case():
    case = Case("DeepSeek-V3", "N", {"T": 64, "E": 16, "K": 32, "N": 24, "top_k": 8, "skewed": 1}, torch.float32, "fwd")
    x, w, sizes = SPEC.make_inputs(case, DEVICE)
    assert x.shape == (64, 32) and w.shape == (16, 32, 24) and sizes.sum() == 64
    assert sizes[12:].tolist() == [0, 0, 0, 0]
