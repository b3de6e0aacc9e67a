"""kreward problems vet PATH... (python -m kreward.vet PATH...): vets a
task set, prints the summary table; docs/vetting.md."""
import argparse
import os
import sys

from . import Limits, print_progress, run


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="kreward problems vet",
        description="Vet KernelBench-format files and kreward problems: import, determinism, "
                    "the reference's time (eager, torch.compile), launch-bound sizes, trivial "
                    "answers, tolerance headroom, duplicates. Writes vet.jsonl, summary.md, "
                    "kept/ and refused/ in --out.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="problem files and folders")
    p.add_argument("--out", "-o", help="the run's folder (default: ./vetted); an earlier run "
                                       "there is resumed")
    p.add_argument("--max-reference-ms", type=float, default=Limits.max_reference_ms,
                   help="refuse a reference slower than this, eager (default 100: CUDA Agent's)")
    p.add_argument("--min-headroom", type=float, default=Limits.min_tolerance_headroom,
                   help="refuse a problem whose tolerance is less than this many times the "
                        "reference's own error against float64 (default 2)")
    p.add_argument("--min-kernel-us", type=float, default=Limits.min_kernel_us,
                   help="refuse a kreward problem whose reference kernel time is under this")
    p.add_argument("--keep-launch-bound", action="store_true", help="do not refuse launch-bound")
    p.add_argument("--keep-weak", action="store_true", help="do not refuse weak problems")
    p.add_argument("--keep-duplicates", action="store_true", help="do not refuse duplicates")
    p.add_argument("--devices", help="GPU indices (0,1), or cpu to time on the CPU (default: "
                                     "every GPU; without one, the time limits are not checked)")
    p.add_argument("--jobs", "-j", type=int, help="files at once (default: the CPUs)")
    p.add_argument("--chunk", type=int, help="files imported, then measured, at a time; each "
                                             "chunk's records are kept when a run is stopped "
                                             "(default: twice --jobs)")
    p.add_argument("--no-compile", action="store_true", help="do not time torch.compile")
    p.add_argument("--atol", type=float, default=1e-2)
    p.add_argument("--rtol", type=float, default=1e-2)
    p.add_argument("--timeout", type=float, default=600, help="seconds per file and step")
    p.add_argument("--restart", action="store_true", help="vet everything again (no resume)")
    p.add_argument("--html", metavar="OUT", help="also write the run as an HTML page "
                                                 "(kreward report vet.jsonl --html OUT)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    a = p.parse_args(argv)
    devices = None
    if a.devices:
        devices = "cpu" if a.devices == "cpu" else [int(d) for d in a.devices.split(",") if d]
    limits = Limits(max_reference_ms=a.max_reference_ms, min_tolerance_headroom=a.min_headroom,
                    min_kernel_us=a.min_kernel_us, refuse_launch_bound=not a.keep_launch_bound,
                    refuse_weak=not a.keep_weak, refuse_duplicates=not a.keep_duplicates)
    if "OMP_NUM_THREADS" not in os.environ:
        # every file's subprocesses run torch: the CPUs shared among the files at once
        cpus = os.cpu_count() or 1
        os.environ["OMP_NUM_THREADS"] = str(max(1, cpus // (a.jobs or cpus)))
    try:
        result = run(a.paths, out=a.out or "vetted", limits=limits, jobs=a.jobs, devices=devices,
                     resume=not a.restart, compile=not a.no_compile, atol=a.atol, rtol=a.rtol,
                     timeout_s=a.timeout, progress=None if a.quiet else print_progress,
                     chunk=a.chunk)
    except (FileNotFoundError, ValueError) as e:
        print(f"kreward problems vet: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(result.summary)
    if a.html:
        from ..pages import render
        try:
            render(os.path.join(result.folder, "vet.jsonl"), a.html, kind="vet")
        except Exception as e:  # noqa: BLE001 - the run is kept; the page could not be written
            print(f"kreward problems vet: the page {a.html} could not be written: {e}",
                  file=sys.stderr)
            return 4
        print(f"page: {a.html}")
    print(f"\n{len(result.kept)} kept, {len(result.refused)} refused: {result.folder}/vet.jsonl, "
          f"{result.folder}/kept/, {result.folder}/refused/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
