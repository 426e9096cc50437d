"""Search answers the reader's real questions, with the site's real search engine on its real index.

Two tests:

* three questions typed into the search box of the built site, each of which
  must bring one of its right pages into the first three pages listed
  (Material groups results by page);
* :data:`QUESTIONS`: reader questions, each written twice, as keywords and as
  a reader would ask it in plain English, and each with the section (page and
  anchor) that answers it. Every form is run through Material's own search
  worker (lunr, with the site's separator and pipeline, on the built
  ``search/search_index.json``), started in Chromium from the built site
  exactly as the search box starts it; a form passes when an answering
  section is among the five best-scored entries the engine returns (a page's
  own entry counts only where the page is the answer). At least
  :data:`PASS_RATE` of the questions must pass in each form; the failures are
  listed with what came first instead.

The questions name the sections that hold their answers (more than one where
several do). All but the last eight were written from the pages' text before
the search was tuned (the index, the separator, the title boost, headings that
name their topic); the last eight afterwards, as a check on questions the
tuning never saw. A question is not removed because it fails: the page, its
headings or the index are what to fix. When a heading is renamed, its anchor
in :data:`QUESTIONS` must follow (the test says which ones are gone).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytestmark = pytest.mark.slow

QUESTIONS_TYPED = {
    "how do I write a backward pass": {"tutorials/backward_pass/"},
    "why is my kernel slow": {"tutorials/gpu_model/", "tutorials/measuring/"},
    "what is num_warps": {"tutorials/autotuning/", "tutorials/gpu_model/"},
}

TOP = 5
PASS_RATE = 0.9


@dataclass(frozen=True)
class Question:
    keywords: str
    plain: str
    answers: tuple[str, ...]  # search locations: "page/" or "page/#anchor"


def q(keywords: str, plain: str, *answers: str) -> Question:
    return Question(keywords, plain, answers)


DBG = "tutorials/debugging/"
AUTO = "tutorials/autotuning/"
MEAS = "tutorials/measuring/"
GPU = "tutorials/gpu_model/"
TILE = "tutorials/tiled_matmul/"
BWD = "tutorials/backward_pass/"
ATT = "kernels/flash_attention/"
MM = "kernels/matmul/"
CE = "kernels/cross_entropy/"

QUESTIONS = [
    # Debugging
    q(
        "masked load other value max",
        "what should other be when I mask a load before a max",
        DBG + "#2-the-wrong-fill-value-for-masked-lanes",
    ),
    q(
        "int32 offset overflow int64",
        "why do my offsets overflow on a big tensor",
        DBG + "#3-int32-offsets-that-overflow",
        "kernels/vector_add/#hazards-why-each-line-exists",
    ),
    q(
        "tl.arange power of two",
        "why does tl.arange need a power of two size",
        DBG + "#5-a-block-size-that-is-not-a-power-of-two",
    ),
    q(
        "tl.dot K 16 minimum",
        "why does tl.dot fail when K is smaller than 16",
        DBG + "#6-a-dot-product-with-a-dimension-below-16",
    ),
    q(
        "grid floor division cdiv",
        "my kernel never writes the last elements of the output",
        DBG + "#9-floor-division-for-the-grid-the-last-elements-never-written",
    ),
    q(
        "in-place output overwrite input race",
        "can I write the output over the input in place",
        DBG + "#8-writing-the-output-over-the-input",
    ),
    q(
        "transposed non-contiguous strides wrong result",
        "my kernel gives wrong results on a transposed tensor",
        DBG + "#10-forgetting-contiguity-wrong-results-on-a-transposed-tensor",
    ),
    q(
        "tl.device_print static_print",
        "how do I print values from inside a kernel",
        DBG + "#printing-asserting-and-catching-out-of-bounds-accesses",
    ),
    q(
        "compute-sanitizer memcheck out-of-bounds",
        "how do I find out of bounds memory accesses on the GPU",
        DBG + "#printing-asserting-and-catching-out-of-bounds-accesses",
    ),
    q(
        "TRITON_INTERPRET interpreter CPU",
        "how do I run a Triton kernel without a GPU",
        "tutorials/first_kernel/#the-interpreter-switch",
        DBG + "#the-interpreter-your-kernel-as-numpy",
        "getting-started/#run-a-kernel-on-your-cpu",
        "getting-started/#where-it-runs",
        "tutorials/first_kernel/",  # its introduction: "This notebook runs a real Triton kernel without a GPU"
        "#what-runs-where",  # the home page
    ),
    # Meta-parameters and autotuning
    q(
        "num_warps num_stages",
        "what do num_warps and num_stages control",
        AUTO + "#1-the-knobs-what-num_warps-and-num_stages-are",
    ),
    q(
        "triton.autotune key configs",
        "how does the autotune decorator choose a config",
        AUTO + "#2-the-autotune-decorator",
    ),
    q(
        "prune_configs_by early_config_prune",
        "how can I drop configs before the autotuner times them",
        AUTO + "#3-pruning-configs-before-timing-them",
    ),
    q(
        "triton.heuristics EVEN_K",
        "how do I compute a meta-parameter from the arguments",
        AUTO + "#4-heuristics-compute-meta-parameters",
    ),
    q(
        "TRITON_CACHE_DIR compiled kernel cache",
        "where does Triton keep compiled kernels",
        AUTO + "#5-caching-where-compiled-kernels-and-tuning-results-are-kept",
    ),
    q(
        "autotune interpreter several configs",
        "why does autotuning fail under the interpreter",
        AUTO + "#7-autotuned-kernels-under-the-interpreter",
        "contributing/#toolchain-traps",
    ),
    # Measuring
    q(
        "cuda events elapsed_time synchronize",
        "how do I time a kernel on the GPU",
        MEAS + "#events-time-the-device-not-the-host",
        MEAS + "#1-a-launch-returns-before-the-work-is-done",
    ),
    q(
        "warm-up first call compile",
        "why is the first call to my kernel so slow",
        MEAS + "#2-warm-up-and-never-time-the-first-call",
    ),
    q(
        "median samples benchmark noise",
        "should I report the mean or the median time",
        MEAS + "#3-many-samples-and-the-median",
    ),
    q(
        "L2 cache flush benchmark",
        "do my benchmark inputs staying in L2 cache matter",
        MEAS + "#4-inputs-that-sit-in-l2",
    ),
    q(
        "triton.testing.do_bench",
        "what does do_bench actually measure",
        MEAS + "#5-what-tritons-benchmark-helper-do_bench-does",
    ),
    q(
        "torch.profiler kernel times",
        "how do I see which kernels ran and how long each took",
        MEAS + "#8-the-profiler-which-kernels-ran-and-for-how-long",
    ),
    q(
        "PTX SASS assembly",
        "how do I read the assembly Triton generates",
        MEAS + "#9-reading-what-the-compiler-produced",
    ),
    q(
        "Nsight Compute ncu",
        "how do I profile my kernel with Nsight",
        MEAS + "#11-two-more-tools-a-pytorch-timer-and-nsight",
    ),
    # The GPU
    q(
        "warp 32 threads lockstep",
        "what is a warp",
        GPU + "#warps-32-threads-in-lockstep",
    ),
    q(
        "occupancy registers per thread",
        "how do registers limit occupancy",
        GPU + "#registers-and-occupancy",
    ),
    q(
        "shared memory bank conflicts",
        "what is a bank conflict",
        GPU + "#shared-memory-and-bank-conflicts",
    ),
    q(
        "coalescing 128-byte transactions",
        "what does coalesced memory access mean",
        GPU + "#global-memory-coalescing-into-128-byte-transactions",
    ),
    q(
        "wave quantisation tail SMs",
        "why does a grid slightly larger than the number of SMs take twice as long",
        GPU + "#waves-and-wave-quantisation",
    ),
    q(
        "memory bound compute bound roofline",
        "how do I know if my kernel is memory bound or compute bound",
        GPU + "#the-roofline-memory-bound-or-compute-bound",
        GPU + "#why-is-my-kernel-slow",
        MM + "#arithmetic-intensity-and-the-roofline",
    ),
    # Randomness, fusion, reductions, tiling
    q(
        "philox seed offset random numbers",
        "how do I generate random numbers inside a kernel",
        "tutorials/dropout/#counter-based-randomness-philox",
    ),
    q(
        "dropout backward same seed mask",
        "how does the dropout backward get the mask without storing it",
        "tutorials/dropout/#the-backward-from-the-same-seed-the-mask-regenerated-never-stored",
    ),
    q(
        "tanh overflow NaN",
        "why does my tanh give NaN for large inputs",
        "tutorials/gelu/#an-overflow-safe-tanh",
    ),
    q(
        "per-lane accumulator scalar reduction loop",
        "should I accumulate a vector or a scalar in a reduction loop",
        "tutorials/row_sum/#per-lane-or-scalar-accumulator",
    ),
    q(
        "GROUP_SIZE_M program order L2",
        "why does the order of the programs matter for a matmul",
        TILE + "#4-program-order-and-the-l2-cache",
        MM + "#grouped-ordering",
    ),
    q(
        "tf32 input_precision fp32 dot",
        "why is my fp32 matmul less precise than torch",
        TILE + "#6-the-tf32-trap",
    ),
    q(
        "fused epilogue activation matmul",
        "how do I fuse an activation into a matmul",
        TILE + "#5-a-fused-epilogue",
        MM + "#the-epilogue",
    ),
    q(
        "strides elements bytes",
        "are strides in bytes or in elements",
        TILE + "#strides-are-in-elements",
    ),
    # Backward passes
    q(
        "save_for_backward needs_input_grad",
        "what should an autograd Function save for the backward",
        BWD + "#what-an-autograd-function-saves-and-returns",
    ),
    q(
        "gradcheck float64 backward test",
        "how do I test that my backward kernel is correct",
        BWD + "#testing-a-backward",
    ),
    q(
        "vector-Jacobian product",
        "what does a backward pass compute",
        BWD + "#what-a-backward-computes-jacobians-and-vector-jacobian-products",
    ),
    q(
        "lock atomic_xchg barrier release",
        "why does releasing the lock need a barrier",
        "tutorials/layer_norm_locks/#why-the-release-needs-a-barrier",
    ),
    # Why Triton
    q(
        "Triton vs CUDA",
        "what does Triton do for me that CUDA makes me do by hand",
        "tutorials/why_triton/#what-cuda-makes-you-do-by-hand-and-what-triton-does-for-you",
    ),
    q(
        "Triton wrong tool limitations",
        "when should I not use Triton",
        "tutorials/why_triton/#when-not-to-use-triton-where-it-is-the-wrong-tool",
    ),
    # Attention
    q(
        "online softmax rescale running maximum",
        "how can softmax be computed one block at a time",
        ATT + "#the-online-softmax",
        ATT + "#how-can-softmax-be-computed-block-by-block-without-the-rows-maximum",
        "kernels/fused_softmax/#rows-wider-than-one-block-the-online-recurrence",
    ),
    q(
        "exp2 log2e",
        "why use exp2 instead of exp",
        ATT + "#why-exp2",
    ),
    q(
        "sm_scale sqrt d_k",
        "is sm_scale one over the square root of the head dimension",
        ATT + "#is-sm_scale-the-square-root-of-the-head-size",
    ),
    q(
        "make_block_ptr replacement",
        "what replaced tl.make_block_ptr",
        ATT + "#what-are-tlmake_block_ptr-tladvance-and-order",
        "contributing/#toolchain-traps",
    ),
    q(
        "tl.multiple_of",
        "why do kernels call tl.multiple_of",
        ATT + "#why-is-tlmultiple_of-necessary",
    ),
    q(
        "BLOCK_M BLOCK_N attention",
        "what do BLOCK_M and BLOCK_N mean in attention",
        ATT + "#what-are-block_m-and-block_n",
    ),
    q(
        "STAGE causal attention tutorial",
        "what does STAGE mean in the Triton attention tutorial",
        ATT + "#what-is-stage-and-which-key-blocks-does-causal-attention-visit",
    ),
    q(
        "fp8 V transposed wgmma",
        "why is V transposed for fp8 attention",
        ATT + "#why-is-v-transposed-when-it-is-fp8-and-only-v",
    ),
    q(
        "waves_per_eu is_hip",
        "what does waves_per_eu do",
        ATT + "#what-do-is_hip-waves_per_eu-and-the-head-size-assert-do",
    ),
    q(
        "log-sum-exp saved backward attention",
        "what does the attention forward save for the backward",
        ATT + "#what-the-saved-log-sum-exp-is-for",
    ),
    q(
        "cuDNN attention faster Triton",
        "why is cuDNN faster than the Triton attention kernel",
        ATT + "#why-the-triton-kernel-trails-cudnn-at-full-attention",
    ),
    # Matmul and low-bit weights
    q(
        "split-K small M",
        "how do I speed up a matmul with very few rows",
        MM + "#split-k-for-small-m",
    ),
    q(
        "persistent kernel TMA",
        "what is a persistent matmul kernel",
        MM + "#persistent-kernel-with-tma",
    ),
    q(
        "programmatic dependent launch PDL",
        "can a kernel start before the previous kernel finishes",
        MM + "#programmatic-dependent-launch",
    ),
    q(
        "GEMV decode one row",
        "how do I write a fast matrix vector product",
        MM + "#a-gemv-kernel-for-one-row",
    ),
    q(
        "int4 packing int32",
        "how are int4 weights packed",
        "kernels/quantized_matmul/#packing-eight-codes-in-one-int32",
        "kernels/quantized_matmul/#the-layout-transposed-packed-along-k",
    ),
    q(
        "low-bit weights win",
        "when are int4 weights faster than fp16",
        "kernels/quantized_matmul/#when-low-bit-weights-win-and-when-they-do-not",
    ),
    # The other chapters
    q(
        "label smoothing gradient",
        "how does label smoothing change the cross entropy gradient",
        CE + "#label-smoothing",
    ),
    q(
        "ignore_index ignored tokens reduction",
        "how are ignored tokens counted in the mean loss",
        CE + "#reductions-and-ignored-tokens",
    ),
    q(
        "logit soft-capping",
        "what is logit soft capping",
        CE + "#scaling-and-soft-capping-the-chain-rule",
    ),
    q(
        "fused linear cross entropy logits memory",
        "how do I compute the loss without materialising the logits",
        CE + "#fused-linear-cross-entropy",
        CE + "#the-memory-arithmetic-at-llama-3-scale",
    ),
    q(
        "layernorm backward dx",
        "what is the gradient of layer norm with respect to its input",
        "kernels/layer_norm/#backward-the-compact-vector-form",
        "kernels/layer_norm/#backward-the-jacobian-through-mu-and-sigma",
        "tutorials/layer_norm_locks/#the-backward-derived",  # derives the same dx
        "tutorials/layer_norm_locks/#the-backward-kernel-dx-and-a-share-of-d-d",
    ),
    q(
        "silu derivative",
        "what is the derivative of SiLU",
        "kernels/swiglu/#silu-and-its-derivative",
    ),
    q(
        "gelu tanh approximation error",
        "how far is the tanh GELU from the exact one",
        "kernels/geglu/#the-tanh-approximation",
    ),
    # How the site measures, and getting started
    q(
        "CUDA graph replay timing",
        "how are the benchmarks on this site timed",
        "performance/#how-it-is-timed",
    ),
    q(
        "above copy ceiling",
        "how can a kernel be faster than the copy ceiling",
        "performance/#rows-above-the-copy-ceiling",
    ),
    q(
        "install CPU PyTorch make",
        "how do I install the handbook without a GPU",
        "getting-started/#install",
    ),
    # Written after the index and the headings above were changed, and not tuned for:
    # how the search does on questions it was not fitted to.
    q(
        "softmax backward Jacobian",
        "what is the gradient of softmax",
        "kernels/fused_softmax/#the-backward",
    ),
    q(
        "softmax overflow subtract max",
        "why subtract the maximum before exp in softmax",
        "kernels/fused_softmax/#definition-and-the-stable-form",
    ),
    q(
        "rmsnorm forward rstd",
        "how is RMSNorm computed",
        "kernels/rms_norm/#forward",
    ),
    q(
        "scale zero point quantisation",
        "what are the scale and the zero point of int4 weights",
        "kernels/quantized_matmul/#codes-scales-and-zero-points",
    ),
    q(
        "swiglu gradients du dg",
        "what are the gradients of SwiGLU",
        "kernels/swiglu/#swiglu-the-forward-and-both-gradients",
    ),
    q(
        "warp specialisation Gluon",
        "what is warp specialization",
        ATT + "#5-warp-specialised-in-gluon",
        ATT + "#6-the-backward-warp-specialised-in-gluon",
    ),
    q(
        "cross entropy chunked vocabulary online",
        "how does the cross entropy kernel handle a vocabulary too big for one block",
        CE + "#the-online-log-sum-exp",
        CE + "#one-read-instead-of-two-rows-split-across-programs",
    ),
    q(
        "tensor descriptor TMA",
        "what is a tensor descriptor",
        MM + "#persistent-kernel-with-tma",
        ATT + "#3-tuned-a-config-table-and-tma",
    ),
]


# Runs in a page of the built site: starts Material's search worker the way its search box
# does (the worker script named in the page's __config, the index the box downloads), then
# sends each query as the box sends what is typed, and ranks every entry it returns by score.
ENGINE = r"""async ([queries, top]) => {
  const config = JSON.parse(document.getElementById("__config").textContent);
  const base = new URL(config.base + "/", location.href);
  const index = await (await fetch(new URL("search/search_index.json", base))).json();
  const worker = new Worker(new URL(config.search, location.href));
  const reply = () => new Promise(resolve =>
    worker.addEventListener("message", ev => resolve(ev.data), { once: true }));
  const SETUP = 0, READY = 1, QUERY = 2;
  let next = reply();
  worker.postMessage({ type: SETUP, data: { config: index.config, docs: index.docs, options: { suggest: false } } });
  if ((await next).type !== READY) throw new Error("the search worker did not get ready");
  const ranked = {};
  for (const query of queries) {
    next = reply();
    worker.postMessage({ type: QUERY, data: query });
    const items = (await next).data.items.flat().filter(item => item.score > 0);
    items.sort((a, b) => b.score - a.score);
    ranked[query] = items.slice(0, top).map(item => item.location);
  }
  worker.terminate();
  return {ranked, locations: index.docs.map(doc => doc.location)};
}"""

TOP_PAGES = """() => {
  const pages = [];
  for (const item of document.querySelectorAll('.md-search-result__list > .md-search-result__item')) {
    const link = item.querySelector('a.md-search-result__link');
    if (!link) continue;
    const path = new URL(link.href).pathname.replace(/^\\//, '');
    if (!pages.includes(path)) pages.push(path);
  }
  return pages;
}"""


@pytest.fixture(scope="module")
def search_page(base_url, browser):
    context = browser.new_context()
    page = context.new_page()
    yield page
    context.close()


@pytest.mark.parametrize("question", QUESTIONS_TYPED)
def test_reader_question_finds_the_right_page(search_page, base_url, question):
    page = search_page
    page.goto(base_url + "/", wait_until="networkidle")
    page.keyboard.press("/")  # Material's shortcut: focus the search box
    page.keyboard.type(question)
    page.wait_for_selector(".md-search-result__item", timeout=10_000)
    page.wait_for_timeout(300)  # results settle after the last keystroke
    pages = page.evaluate(TOP_PAGES)
    print(f"{question!r}: {pages[:5]}")
    assert set(pages[:3]) & QUESTIONS_TYPED[question], (
        f"{question!r}: top 3 are {pages[:3]}, expected one of {sorted(QUESTIONS_TYPED[question])}"
    )


def run_engine(page, base_url: str, queries: list[str], top: int = TOP) -> tuple[dict[str, list[str]], set[str]]:
    """Each query's ``top`` best entries (locations) from the built site's search worker, and every location."""
    page.goto(base_url + "/", wait_until="load")
    out = page.evaluate(ENGINE, [queries, top])
    return out["ranked"], set(out["locations"])


def test_questions_are_well_formed():
    assert len(QUESTIONS) >= 40
    forms = [x.keywords for x in QUESTIONS] + [x.plain for x in QUESTIONS]
    assert len(set(forms)) == len(forms), "a question form is written twice"
    for x in QUESTIONS:
        assert x.answers and all(a and not a.startswith("/") for a in x.answers), x


def test_reader_questions_find_the_answering_section(search_page, base_url):
    ranked, locations = run_engine(search_page, base_url, [f for x in QUESTIONS for f in (x.keywords, x.plain)])
    gone = sorted({a for x in QUESTIONS for a in x.answers} - locations)
    assert not gone, f"answers no longer in the search index (a heading renamed? update the question): {gone}"
    report, rates = [], {}
    for form in ("keywords", "plain"):
        failed = []
        for x in QUESTIONS:
            text = getattr(x, form)
            if not set(ranked[text]) & set(x.answers):
                failed.append(f"  {text!r}: wanted {' or '.join(x.answers)}; top {TOP}: {ranked[text]}")
        rates[form] = 1 - len(failed) / len(QUESTIONS)
        report.append(f"{form}: {len(QUESTIONS) - len(failed)}/{len(QUESTIONS)} in the top {TOP} ({rates[form]:.0%})")
        report += failed
    print("\n".join(report))
    assert min(rates.values()) >= PASS_RATE, "\n".join(report)
