"""``academy``: the command line of the handbook.

```text
academy env                 device, versions, interpreter mode
academy check SLUG...       run a chapter's tests on this machine's device
academy bench SLUG... [--quick] [--out DIR] [--sweep NAME]... [--resume]
                            measure on a GPU and write results files
                            (--sweep: only those sweeps, merged into the file;
                            --resume: finish a whole run that was stopped)
academy results             list results files; exit 1 if any is stale
```
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _env(_: argparse.Namespace) -> int:
    from academy.env import describe

    info = describe()
    width = max(map(len, info))
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from academy.chapters import chapter

    import pytest

    folders = [str(chapter(slug).tests_dir) for slug in args.slugs]
    return int(pytest.main(["-q", "-p", "no:cacheprovider", *folders]))


def _existing_results(slug: str, target: Path, allow_new: bool):
    """The results file ``academy bench --sweep`` merges into (this GPU's, in ``target``), checked
    against the current kernel code before any GPU time is spent; ``None`` for a new file."""
    from academy.bench import results as results_io
    from academy.chapters import chapter

    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("benchmarks need a CUDA GPU; on this machine the site shows committed results")
    gpu = torch.cuda.get_device_properties(0).name
    path = target / f"{results_io.gpu_key(gpu)}.json"
    if not path.exists():
        if allow_new:
            return None
        raise ValueError(f"{slug}: --sweep merges into {path}, which does not exist: run the whole benchmark first")
    existing = results_io.load(path)
    results_io.check_mergeable(existing, chapter(slug).code_hash(), gpu)
    return existing


def _bench(args: argparse.Namespace) -> int:
    from academy.bench import results as results_io
    from academy.bench.runner import load_spec, run
    from academy.chapters import chapter

    if args.resume and args.sweep:
        raise ValueError("--resume resumes a whole run; with --sweep, name fewer sweeps per run instead")
    for slug in args.slugs:
        target = Path(args.out) / slug if args.out else chapter(slug).results_dir
        if args.sweep:
            sweeps = load_spec(slug).sweep_names(args.sweep)  # an unknown name: a clear error, no GPU work
            existing = _existing_results(slug, target, allow_new=bool(args.out))
            measured = run(slug, quick=args.quick, sweeps=sweeps)
            saved = measured if existing is None else results_io.merge_sweeps(existing, measured, sweeps)
            path = results_io.save(saved, target)
        else:
            saved, path = _whole_run(slug, target, quick=args.quick, resume=args.resume)
            measured = saved
        merged = f", merged into {len(saved.rows)} rows" if saved is not measured else ""
        print(f"{slug}: {len(measured.rows)} rows{merged} -> {path}")
        for provider, reason in measured.skipped.items():
            print(f"  skipped {provider}: {reason}")
        for row in measured.rows:
            print(
                f"  {row.mode:8s} {row.shape_label:>14s} {row.provider:8s} {row.ms:9.4f} ms "
                f"{row.rate:9.1f} {measured.unit_of(row.metric)} {100 * row.fraction_of_ceiling:6.1f}%"
            )
    return 0


def _whole_run(slug: str, target: Path, *, quick: bool, resume: bool):
    """Every case, saved after each one ends (`academy.bench.progress`); with ``resume``, only
    the cases that a stopped run on this GPU, of this kernel code, did not finish. Returns the
    results and the path of the results file, written before the progress is discarded."""
    from academy.bench import progress
    from academy.bench import results as results_io
    from academy.bench.runner import load_spec, run
    from academy.chapters import chapter

    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("benchmarks need a CUDA GPU; on this machine the site shows committed results")
    gpu = torch.cuda.get_device_properties(0).name
    run_cases = {case.key: case.sweep for case in load_spec(slug).cases(quick=quick)}
    earlier = progress.load(target, gpu, run_cases) if resume else None
    done = [] if earlier is None else earlier.cases_done
    if earlier is not None:
        results_io.check_mergeable(earlier.results, chapter(slug).code_hash(), gpu)
        print(f"{slug}: resuming after {len(done)} of {len(run_cases)} cases")

    def with_earlier(measured, cases: list[str]):
        return measured if earlier is None else results_io.merge_cases(earlier.results, measured, cases, run_cases)

    def checkpoint(cases_ended: list[str], measured) -> None:
        progress.save(progress.Partial(with_earlier(measured, cases_ended), done + cases_ended), target)

    remaining = [key for key in run_cases if key not in done]
    if remaining:
        whole = with_earlier(run(slug, quick=quick, skip=done, on_case_done=checkpoint), remaining)
    else:  # stopped after its last case, before the results file was written
        whole = earlier.results
    path = results_io.save(whole, target)
    progress.discard(target, gpu)  # after the results file: a run stopped while writing it can still resume
    return whole, path


def _results(_: argparse.Namespace) -> int:
    from academy.bench.results import load
    from academy.chapters import all_chapters

    stale = 0
    for found in all_chapters():
        files = found.results_files()
        if not files:
            print(f"{found.slug}: not measured")
        for path in files:
            measured = load(path)
            fresh = measured.provenance.kernel_hash == found.code_hash()
            stale += not fresh
            state = "fresh" if fresh else "STALE (kernel changed since)"
            print(f"{found.slug}: {path.name} {measured.provenance.gpu}, {measured.provenance.date}: {state}")
    return 1 if stale else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="academy", description="Triton Academy command line")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("env", help="device, versions and interpreter mode").set_defaults(handler=_env)
    check = commands.add_parser("check", help="run a chapter's correctness tests on this device")
    check.add_argument("slugs", nargs="+", metavar="SLUG")
    check.set_defaults(handler=_check)
    bench = commands.add_parser("bench", help="measure chapters on a GPU and write results")
    bench.add_argument("slugs", nargs="+", metavar="SLUG")
    bench.add_argument("--quick", action="store_true", help="only the first shapes of each sweep")
    bench.add_argument("--out", help="write to OUT/SLUG/<gpu>.json instead of examples/SLUG/results/")
    bench.add_argument(
        "--sweep",
        action="append",
        metavar="NAME",
        help="measure only this sweep, or the sweeps named NAME + ' …' (repeatable), and merge their rows into "
        "this GPU's results file, replacing theirs; refused unless the file measured the current kernel code",
    )
    bench.add_argument(
        "--resume",
        action="store_true",
        help="finish a whole run that was stopped: measure only the cases its saved progress "
        "(results/partial/<gpu>.json) lacks; refused unless that progress measured the current kernel code",
    )
    bench.set_defaults(handler=_bench)
    commands.add_parser("results", help="list results files; exit 1 if any is stale").set_defaults(handler=_results)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (ValueError, RuntimeError) as error:
        print(f"academy {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
