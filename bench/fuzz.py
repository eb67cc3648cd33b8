"""The structured fuzzer's long run: the generated stores of tests/fuzz (valid
hierarchies spoiled by drawn mutations), each mounted through the kernel-free core and
walked whole, as tests/fuzz/test_fuzzed_stores.py does with its fixed seed and count,
here with other seeds, in several processes, for as long as asked. Every store that goes
wrong is written to the output directory as its plan (JSON lines: the plan, what was found),
so that it can be replayed (--replay FILE) and kept as a regression case.

    python bench/fuzz.py [--stores 50000] [--processes 2] [--seed 1] [--out /tmp/zarrfs-fuzz]
                         [--seconds S]

Prints, per process and in all: stores walked, calls made, failures by errno, problems
found (0 is the goal), stores per second. `--seconds` ends the run then, with the stores
walked so far; each process also appends its count to progress-SEED.txt in the output
directory every 100 stores."""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


class _OutOfTime(Exception):
    pass


def run(seed: int, stores: int, out: str, seconds: float | None = None) -> dict:
    import errno
    import itertools
    import logging
    import shutil

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    from tests.fuzz.mutations import apply, plans
    from tests.fuzz.stores import discard, discarded, make_case, write_references
    from tests.fuzz.walk import walk_within_limits

    base = Path(tempfile.mkdtemp(prefix=f"zarrfs-fuzz-{seed}-"))
    totals: dict = {"stores": 0, "calls": 0, "failures": {}, "problems": 0, "refused": 0}
    numbers = itertools.count()
    found = Path(out) / f"problems-{seed}.jsonl"

    @hypothesis_seed(seed)
    @settings(max_examples=stores, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(plans())
    def one(plan) -> None:
        if seconds is not None and time.monotonic() - start > seconds:
            raise _OutOfTime
        directory = base / str(next(numbers))
        directory.mkdir()
        try:
            kind, mutations, references = plan
            case = make_case(kind, directory)
            apply(case, mutations)
            if kind == "references":
                write_references(case, directory, references)
            report = walk_within_limits(case, directory / "mnt")
        except Exception as exc:
            report, case = None, None
            problems = [f"the harness failed: {type(exc).__name__}: {exc}"]
        else:
            problems = report.problems
            totals["calls"] += report.calls
            totals["refused"] += report.failures.pop(-1, 0)
            for code, times in report.failures.items():
                name = errno.errorcode.get(code, str(code))
                totals["failures"][name] = totals["failures"].get(name, 0) + times
        finally:
            discard(directory)  # (in the background)
        totals["stores"] += 1
        if totals["stores"] % 100 == 0:
            with (Path(out) / f"progress-{seed}.txt").open("a") as f:
                f.write(f"{totals['stores']} {totals['problems']} {time.monotonic() - start:.0f}\n")
        if problems:
            totals["problems"] += 1
            with found.open("a") as f:
                f.write(json.dumps({"plan": repr(plan), "done": case.done if case else [], "found": problems}) + "\n")

    start = time.monotonic()
    with contextlib.suppress(_OutOfTime):
        one()
    totals["seconds"] = time.monotonic() - start
    discarded()
    shutil.rmtree(base, ignore_errors=True)
    return totals


def replay(path: str) -> None:
    """Walk again the stores a run found wrong, printing what each finds now."""
    import shutil

    from tests.fuzz.mutations import apply
    from tests.fuzz.stores import discarded, make_case, write_references
    from tests.fuzz.walk import walk_within_limits

    warnings.filterwarnings("ignore")
    for line in Path(path).read_text().splitlines():
        kind, mutations, references = eval(json.loads(line)["plan"])  # (our own repr of plain data)
        directory = Path(tempfile.mkdtemp(prefix="zarrfs-fuzz-replay-"))
        case = make_case(kind, directory)
        apply(case, mutations)
        if kind == "references":
            write_references(case, directory, references)
        report = walk_within_limits(case, directory / "mnt")
        shutil.rmtree(directory, ignore_errors=True)
        print(kind, case.done, report.problems or "fine")
    discarded()  # (the copies made ahead)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=50_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="/tmp/zarrfs-fuzz")
    parser.add_argument("--replay", help="a problems-SEED.jsonl file of an earlier run")
    parser.add_argument("--seconds", type=float, help="end the run after this long")
    args = parser.parse_args()
    if args.replay:
        replay(args.replay)
        return
    Path(args.out).mkdir(parents=True, exist_ok=True)
    each = -(-args.stores // args.processes)
    start = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        results = pool.starmap(run, [(args.seed + i, each, args.out, args.seconds) for i in range(args.processes)])
    seconds = time.monotonic() - start
    failures: dict = {}
    for i, result in enumerate(results):
        print(f"process {i} (seed {args.seed + i}): {result['stores']} stores, {result['calls']} calls, "
              f"{result['problems']} with problems, {result['refused']} refused at mount, {result['seconds']:.0f} s")  # fmt: skip
        for name, times in result["failures"].items():
            failures[name] = failures.get(name, 0) + times
    stores = sum(r["stores"] for r in results)
    print(f"all: {stores} stores in {seconds:.0f} s ({stores / seconds:.1f} stores/s), "
          f"{sum(r['calls'] for r in results)} calls, failures by errno {failures}, "
          f"{sum(r['problems'] for r in results)} stores with problems (written to {args.out})")  # fmt: skip


if __name__ == "__main__":
    main()
