"""The low-bit weight matmul chapter's exercise answers against float64 PyTorch."""

from academy import INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.quantized_matmul import exercises
from examples.quantized_matmul.exercises import dequantize_to, locate, quantized_matmul_atomic
from examples.quantized_matmul.kernel import dequantize, kernel_error_bound, pack, quantize


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    """dequantize_to's output starts as NaN, so an element it never writes fails the comparison."""
    poison_allocations(monkeypatch, exercises)


@pytest.mark.parametrize("bits", [4, 8])
def test_locate_finds_every_code(bits):
    q = torch.randint(0, 2**bits, (1, 64))
    words = pack(q, bits)[:, 0]  # the one column's words, along K
    for k in range(64):
        word, bit = locate(k, bits)
        assert (words[word].item() >> bit) & (2**bits - 1) == q[0, k].item()
    assert locate(13, 4) == (1, 20)


@pytest.mark.parametrize("split_k", [1, 3, 8])
@pytest.mark.parametrize("bits, group", [(4, 32), (8, 64), (4, None)])
def test_split_k_atomic_within_the_derived_bound(split_k, bits, group):
    packed = quantize(random_tensor((40, 256)), bits, group)
    x = random_tensor((5, 256), torch.float16)
    y = quantized_matmul_atomic(x, packed, split_k)
    exact = x.double() @ dequantize(packed).double().T
    bound = kernel_error_bound(x, packed, x.dtype) * 2  # the atomics add up to split_k extra fp32 roundings
    assert ((y.double() - exact).abs() <= bound).all()
    assert_close(y, exact, dtype=torch.float16)


@pytest.mark.skipif(INTERPRETED, reason="bf16 and large sizes: GPU only")
def test_split_k_atomic_gpu_bf16():
    packed = quantize(random_tensor((3000, 4096), torch.bfloat16), 4, 128)
    x = random_tensor((7, 4096), torch.bfloat16)
    assert_close(
        quantized_matmul_atomic(x, packed, 8), x.double() @ dequantize(packed).double().T, dtype=torch.bfloat16
    )


def test_split_k_atomic_rejects_a_bad_split():
    packed = quantize(random_tensor((8, 64)), 4, 32)
    with pytest.raises(ValueError, match="split_k"):
        quantized_matmul_atomic(random_tensor((2, 64), torch.float16), packed, 0)


@pytest.mark.parametrize("bits, group, shape", [(4, 32, (24, 128)), (8, 128, (7, 256)), (4, None, (9, 200))])
def test_dequantize_kernel_equals_the_reference(bits, group, shape):
    packed = quantize(random_tensor(shape), bits, group)
    expected = dequantize(packed)
    assert torch.equal(dequantize_to(packed, torch.float32), expected)  # exact in fp32
    assert torch.equal(dequantize_to(packed, torch.float16), expected.half())  # one rounding


def test_dequantize_kernel_rejects_integer_output():
    with pytest.raises(TypeError, match="dtype"):
        dequantize_to(quantize(random_tensor((8, 64)), 4, 32), torch.int8)


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (
            quantized_matmul_atomic,
            lambda: (_grad(random_tensor((2, 64), torch.float16)), quantize(random_tensor((8, 64)), 4, 32)),
        ),
    ],
    ids=["quantized_matmul_atomic"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())
