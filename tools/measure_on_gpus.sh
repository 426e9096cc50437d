#!/usr/bin/env bash
# Measure chapters on every visible GPU at once, one group of chapters per GPU.
#
#   tools/measure_on_gpus.sh OUT "slug_a,slug_b" "slug_c" ...
#
# GPU i takes the i-th group: it runs the group's tests with verified-with
# records on (tests/<slug>/, as `academy check` does), then `academy bench` for
# each slug, with --resume (not with --sweep): a chapter whose earlier run was
# stopped measures only its missing cases. Logs go to OUT/gpu<i>.log; the
# results files, the progress of stopped runs (results/partial/) and verified
# records of every chapter are packed into OUT/measured.tgz (unpack at the
# repository root). Every step ends by the deadline ACADEMY_DEADLINE_S seconds after the
# start (default 540, for a 600-second call): a step that would overrun is
# stopped, and what finished is still packed. Set ACADEMY_GIT_COMMIT and
# ACADEMY_GIT_DIRTY=0 when the copy of the tree has no usable .git (see
# docs/contributing.md). ACADEMY_SKIP_TESTS=1 skips the tests, and a
# comma-separated list of slugs skips those chapters' tests (their verified
# records are already fresh); extra options go in ACADEMY_PYTEST_ARGS and
# ACADEMY_BENCH_ARGS.
set -uo pipefail
out=$1
shift
gpus=$(nvidia-smi -L | wc -l)
if (($# > gpus)); then
    echo "$# groups for $gpus GPUs" >&2
    exit 2
fi
mkdir -p "$out"
export PYTHONUNBUFFERED=1
deadline=$((SECONDS + ${ACADEMY_DEADLINE_S:-540}))
resume=--resume
[[ ${ACADEMY_BENCH_ARGS:-} == *--sweep* ]] && resume=

# Run a command, stopped at the deadline; skipped when less than 20 s remain.
before_deadline() {
    local left=$((deadline - SECONDS))
    if ((left < 20)); then
        echo "skipped (deadline): $*"
        return 1
    fi
    timeout --kill-after=5 "$left" "$@"
}

i=0
for group in "$@"; do
    (
        export CUDA_VISIBLE_DEVICES=$i
        IFS=, read -ra slugs <<<"$group"
        folders=()
        for slug in "${slugs[@]}"; do
            [[ ,${ACADEMY_SKIP_TESTS:-}, == *,$slug,* ]] || folders+=("tests/$slug")
        done
        echo "== GPU $i: ${slugs[*]}"
        if [[ ${ACADEMY_SKIP_TESTS:-0} != 1 && ${#folders[@]} -gt 0 ]]; then
            start=$SECONDS
            # shellcheck disable=SC2086
            before_deadline env ACADEMY_RECORD_VERIFIED=1 python3 -m pytest -q -p no:cacheprovider -m "not slow" \
                ${ACADEMY_PYTEST_ARGS:-} "${folders[@]}"
            echo "tests: $((SECONDS - start)) s"
        fi
        for slug in "${slugs[@]}"; do
            start=$SECONDS
            # shellcheck disable=SC2086
            before_deadline python3 -m academy.cli bench "$slug" $resume ${ACADEMY_BENCH_ARGS:-} || echo "bench $slug FAILED"
            echo "bench $slug: $((SECONDS - start)) s"
        done
    ) >"$out/gpu$i.log" 2>&1 &
    i=$((i + 1))
done
wait
grep -h -E "^== GPU|passed|failed|^bench |skipped \(deadline\)|recorded|not recorded" "$out"/gpu*.log
tar czf "$out/measured.tgz" examples/*/results examples/*/verified
