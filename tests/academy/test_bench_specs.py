"""Every chapter's benchmark spec builds valid inputs and counts the work its page states."""

from academy.bench.runner import load_spec
from academy.bench.spec import BenchSpec, Case, Sweep
from academy.chapters import all_chapters
from academy.testing import rel_l2_error

import pytest
import torch

SLUGS = [c.slug for c in all_chapters()]


@pytest.mark.parametrize("slug", SLUGS)
def test_spec_is_well_formed(slug):
    spec = load_spec(slug)
    assert spec.slug == slug
    assert list(spec.providers)[0] == "academy", "ours is listed first"
    cases = list(spec.cases())
    assert cases and all(spec.work(case) > 0 for case in cases)
    for mode, shape, dtype in spec.headline:
        assert any(c.mode == mode and dict(c.params) == dict(shape) and c.dtype_name == dtype for c in cases), (
            f"headline case {mode} {shape} {dtype} is not among the measured cases"
        )


@pytest.mark.parametrize("slug", SLUGS)
def test_smallest_case_runs_our_op_against_the_reference(slug):
    """The runner checks each provider like this before timing it; here on a shrunken case."""
    spec = load_spec(slug)
    case = next(iter(spec.cases()))
    small = Case(case.sweep, case.x, {k: min(v, 64) for k, v in case.params.items()}, case.dtype, case.mode)
    inputs = spec.make_inputs(small, "cpu")
    assert all(t.double().abs().sum() > 0 for t in inputs), "inputs must never be zeros"  # fp8 sums need a cast
    ours = spec.providers["academy"]()
    assert rel_l2_error(ours(*inputs), spec.reference(*inputs)) < 1e-2


def test_softmax_bytes_model():
    spec = load_spec("fused_softmax")
    fwd = Case("M=8192", "N", {"M": 8192, "N": 4096}, torch.bfloat16, "fwd")
    both = Case("M=8192", "N", {"M": 8192, "N": 4096}, torch.bfloat16, "fwd+bwd")
    assert spec.work(fwd) == 2 * 8192 * 4096 * 2  # read x, write y
    assert spec.work(both) == 5 * 8192 * 4096 * 2  # + read y, dy; write dx


def test_vector_add_bytes_model():
    spec = load_spec("vector_add")
    assert spec.work(Case("v", "n", {"n": 1000}, torch.float32, "fwd")) == 3 * 1000 * 4


def _spec(**overrides):
    fields = dict(
        slug="x",
        metric="bandwidth",
        sweeps=[Sweep("s", "n", [{"n": 1}, {"n": 2}, {"n": 3}])],
        dtypes=[torch.float32],
        modes=["fwd"],
        make_inputs=lambda c, d: (),
        work=lambda c: 1.0,
        reference=lambda: None,
        providers={"academy": lambda: None},
        quick_shapes=2,
    )
    fields.update(overrides)
    return BenchSpec(**fields)


def test_quick_keeps_the_first_shapes():
    assert [c.params["n"] for c in _spec().cases(quick=True)] == [1, 2]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"metric": "speed"}, "metric"),
        ({"modes": ["bwd"]}, "unknown modes"),
        ({"providers": {"eager": lambda: None}}, "academy"),
    ],
)
def test_bad_spec_is_rejected(overrides, message):
    with pytest.raises(ValueError, match=message):
        _spec(**overrides)


def test_a_sweep_may_override_the_metric():
    spec = _spec(
        sweeps=[Sweep("gemv", x="n", shapes=[{"n": 1}]), Sweep("gemm", x="n", shapes=[{"n": 2}], metric="compute")]
    )
    assert [(c.sweep, c.metric) for c in spec.cases()] == [("gemv", "bandwidth"), ("gemm", "compute")]
    with pytest.raises(ValueError, match="sweep 'gemv': metric"):
        _spec(sweeps=[Sweep("gemv", x="n", shapes=[{"n": 1}], metric="speed")])


def test_a_sweep_may_time_only_some_providers():
    providers = {"academy": lambda: None, "academy:naive": lambda: None}
    spec = _spec(
        providers=providers,
        sweeps=[
            Sweep("small", x="n", shapes=[{"n": 1}], providers=["academy", "academy:naive"]),
            Sweep("large", x="n", shapes=[{"n": 2}]),
        ],
    )
    assert [c.providers for c in spec.cases()] == [("academy", "academy:naive"), None]
    with pytest.raises(ValueError, match="does not have"):
        _spec(sweeps=[Sweep("s", x="n", shapes=[{"n": 1}], providers=["cublas"])])


KERNEL_CHAPTERS = [
    "cross_entropy",
    "fused_softmax",
    "layer_norm",
    "rms_norm",
    "swiglu",
    "geglu",
    "fused_rmsnorm_swiglu",
    "matmul",
    "quantized_matmul",
    "flash_attention",
]
MODEL_SWEEPS = [(slug, name) for slug in KERNEL_CHAPTERS for name in load_spec(slug).sweep_names(["models"])]
MAX_MODEL_SHAPES = 20
"""A chapter's model-zoo sweeps must stay small: the whole benchmark shares a few GPU calls."""


@pytest.mark.parametrize("slug", KERNEL_CHAPTERS)
def test_kernel_chapters_measure_the_model_zoo_in_few_distinct_labelled_shapes(slug):
    spec = load_spec(slug)
    sweeps = [sweep for sweep in spec.sweeps if sweep.name in spec.sweep_names(["models"])]
    assert sweeps, f"{slug} has no models sweep"
    total = 0
    for sweep in sweeps:
        shapes = [tuple(shape.items()) for shape in sweep.shapes]
        assert len(shapes) == len(set(shapes)), f"{sweep.name}: shapes repeat"
        assert sweep.labels and all(sweep.labels), f"{sweep.name}: every shape names its models"
        assert sweep.dtypes is None or len(sweep.dtypes) == 1
        assert len({c.dtype for c in spec.cases(sweeps=[sweep.name])}) == 1, f"{sweep.name}: one dtype"
        total += len(shapes)
    assert total <= MAX_MODEL_SHAPES


@pytest.mark.parametrize("slug, sweep", MODEL_SWEEPS)
def test_models_sweep_shrunk_runs_our_op_against_the_reference(slug, sweep):
    """The first shape of each zoo sweep, shrunk as above: its parameters (heads, kv heads, bits) reach the inputs."""
    spec = load_spec(slug)
    case = next(spec.cases(sweeps=[sweep]))
    assert case.label
    params = {k: min(v, 64) for k, v in case.params.items()}
    if "KV" in params:  # fewer heads, the same query heads per key/value head (grouped-query attention)
        params["KV"] = min(case.params["KV"], 2)
        params["H"] = case.params["H"] // case.params["KV"] * params["KV"]
    inputs = spec.make_inputs(Case(case.sweep, case.x, params, case.dtype, case.mode), "cpu")
    assert all(t.double().abs().sum() > 0 for t in inputs), "inputs must never be zeros"  # fp8 sums need a cast
    ours = spec.providers["academy"]()
    assert rel_l2_error(ours(*inputs), spec.reference(*inputs)) < 1e-2


def test_sweep_names_select_by_name_or_prefix():
    spec = _spec(
        sweeps=[
            Sweep("models M=1", "n", [{"n": 1}]),
            Sweep("models M=2", "n", [{"n": 2}]),
            Sweep("modelsx", "n", [{"n": 3}]),
        ]
    )
    assert spec.sweep_names(["models"]) == ["models M=1", "models M=2"]
    assert spec.sweep_names(["models M=2", "modelsx"]) == ["models M=2", "modelsx"]
    assert [c.params["n"] for c in spec.cases(sweeps=["models M=2"])] == [2]
    with pytest.raises(ValueError, match="no sweep 'model'"):
        spec.sweep_names(["model"])


def test_a_sweep_may_label_its_shapes_and_override_the_dtypes():
    spec = _spec(
        dtypes=[torch.float32, torch.float16],
        sweeps=[Sweep("zoo", "n", [{"n": 1}, {"n": 2}], labels=["A", "B, C"], dtypes=[torch.bfloat16])],
    )
    assert [(c.label, c.dtype) for c in spec.cases()] == [("A", torch.bfloat16), ("B, C", torch.bfloat16)]
    assert [c.label for c in spec.cases(quick=True)] == ["A", "B, C"]
    with pytest.raises(ValueError, match="1 labels for 2 shapes"):
        Sweep("zoo", "n", [{"n": 1}, {"n": 2}], labels=["A"])
