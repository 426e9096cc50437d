"""The benchmark's pieces on the CPU: the PyTorch peers agree with the reference, the lengths are what
the spec's docstring says, and the work model counts every cached K and V element once."""

from academy.bench.spec import Case
from academy.testing import assert_close

import pytest
import torch

from examples.paged_attention import bench
from examples.paged_attention.kernel import reference


@pytest.mark.parametrize("peer", [bench.gather_then_sdpa, bench.sdpa_on_pregathered])
def test_peers_match_the_reference(peer):
    case = Case("t", "B", {"B": 3, "S_min": 5, "S_max": 70, "H": 8, "KV": 2, "D": 64, "page": 16}, torch.float32, "fwd")
    inputs = bench.make_inputs(case, "cuda" if torch.cuda.is_available() else "cpu")
    expected = reference(*(t.double() if t.is_floating_point() else t for t in inputs[:5]))
    assert_close(peer(*inputs), expected)


def test_lengths_and_work():
    linear = bench.seq_lengths({"B": 4, "S_min": 100, "S_max": 400})
    assert sorted(linear) == [100, 200, 300, 400] and linear != sorted(linear)
    assert sorted(bench.seq_lengths({"B": 3, "S_min": 1, "S_max": 10000})) == [1, 100, 10000]  # geometric
    assert bench.seq_lengths({"B": 2, "S_min": 7, "S_max": 7}) == [7, 7]
    case = Case(
        "t", "B", {"B": 4, "S_min": 100, "S_max": 400, "H": 8, "KV": 2, "D": 64, "page": 16}, torch.bfloat16, "fwd"
    )
    assert bench.work(case) == (1000 * 2 * 64 * 2 + 4 * 8 * 64 * 2) * 2
    assert len(list(bench.SPEC.cases())) <= 10, "GPU time is scarce: keep the benchmark to ten cases"
