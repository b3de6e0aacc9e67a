"""python3 -m kreward.serve (what `kreward serve` runs): see --help and
docs/serve.md."""
import argparse
import logging
import sys

from .server import Options, Server, default_problem_dirs


def _size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().rstrip("b").rstrip("i")
    mult = units.get(t[-1:], 1)
    return int(float(t[:-1] if t[-1:] in units else t) * mult)


def parser():
    p = argparse.ArgumentParser(
        prog="kreward serve",
        description="Serve rewards over HTTP: native /v1/evaluate, KernelGYM /evaluate, "
                    "OpenRLHF /openrlhf, slime /slime (docs/serve.md).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (8000; 0: any free one)")
    p.add_argument("--problems", action="append", metavar="DIR",
                   help="a directory of problems (each DIR/NAME/problem.json), repeatable; "
                        "default $KREWARD_PROBLEMS or the bundled suite")
    p.add_argument("--reward", default="makora",
                   help="the default reward: a preset or a JSON file (makora)")
    p.add_argument("--preset", default="fast", choices=("fast", "precise"),
                   help="default benchmark preset (fast)")
    p.add_argument("--token-file", help="require 'Authorization: Bearer TOKEN', the token read "
                   "from this file (or $KREWARD_TOKEN); /health stays open")
    p.add_argument("--max-body", type=_size, default=8 << 20, help="largest request body (8M)")
    p.add_argument("--max-queue", type=int, default=1024,
                   help="jobs accepted and not yet reported, beyond which requests get 429 (1024)")
    p.add_argument("--max-batch", type=int, default=1024, help="largest batch (1024)")
    p.add_argument("--collectors", type=int, default=4, help="collector threads (4)")
    p.add_argument("--gpus", help="the pool's GPUs ('0,1'; 'none': compile only; default all)")
    p.add_argument("--compile-only", action="store_true",
                   help="serve without GPU workers, asked for by name: compile errors are "
                        "judged, every candidate that compiles is answered 'not judged' (never a "
                        "reward); without it a server with no GPU worker does not start")
    p.add_argument("--require-gpu", action="store_true",
                   help="(the default: a server with no GPU worker does not start)")
    p.add_argument("--compile-workers", type=int, default=0, help="the pool's compile workers")
    p.add_argument("--job-timeout", type=float, default=0.0, help="a job's wall limit (300 s)")
    p.add_argument("--drain-timeout", type=float, default=600.0,
                   help="on SIGTERM, how long accepted jobs may run before the pool is freed "
                        "and they get error reports (600 s)")
    p.add_argument("--result-grace", type=float, default=30.0,
                   help="on SIGTERM, how long finished reports wait to be fetched (30 s)")
    p.add_argument("--kernelbench-devices", metavar="LIST",
                   help="where ModelNew candidates run: 'cuda:0,cuda:1' (default every GPU this "
                        "process sees); 'cpu' for tests (no kernel attribution: no speed pay)")
    p.add_argument("--kernelbench-timeout", type=float, default=600.0,
                   help="a ModelNew worker's start, load or build (600 s); a whole evaluation "
                        "gets twice that")
    p.add_argument("--kernelbench-in-flight", type=int, metavar="K",
                   help="ModelNew candidates evaluated at once per GPU, timed one at a time "
                        "(default 1: one at a time; 4 gave 2.42x on an H100, opt-in while a "
                        "neighbour can still change a verdict: docs/kernelbench.md)")
    p.add_argument("--kernelbench-max-spares", type=int, metavar="N",
                   help="with --kernelbench-in-flight K > 1, the most spare ModelNew workers a "
                        "GPU keeps across its problems (default K: one per candidate in flight)")
    p.add_argument("--kernelbench-zygote", action=argparse.BooleanOptionalAction, default=True,
                   help="fork ModelNew workers from a process with torch imported (the default); "
                        "--no-kernelbench-zygote starts each by exec (docs/kernelbench.md)")
    p.add_argument("--log-level", default="info")
    return p


def kernelbench_options(args):
    """The ModelNew scheduler's options (kernelbench/lanes.py make_scheduler)."""
    o = {"runner": {"timeout_s": args.kernelbench_timeout,
                    "call_timeout_s": min(60.0, args.kernelbench_timeout)}}
    if args.kernelbench_devices:
        o["devices"] = [d.strip() for d in args.kernelbench_devices.split(",") if d.strip()]
    if args.kernelbench_in_flight is not None:
        o["in_flight"] = args.kernelbench_in_flight
    if args.kernelbench_max_spares is not None:
        o["max_spares"] = args.kernelbench_max_spares
    o["runner"]["zygote"] = args.kernelbench_zygote
    return o


def main(argv=None):
    args = parser().parse_args(argv)
    token = None
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
        if not token:
            sys.exit(f"kreward serve: {args.token_file} is empty")
    problems = args.problems or default_problem_dirs()
    if not problems:
        sys.exit("kreward serve: no problem directory (--problems DIR or $KREWARD_PROBLEMS)")
    pool_options = {"compile_workers": args.compile_workers, "job_timeout_s": args.job_timeout}
    logging.basicConfig(level=args.log_level.upper(), format="%(message)s")
    try:
        import uvicorn  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as e:
        sys.exit(f"kreward serve: {e.name} is not installed (pip install starlette uvicorn)")
    from .run import serve
    from .server import CompileOnlyRefused
    try:
        server = _server(args, problems, token, pool_options)
    except CompileOnlyRefused as e:
        sys.exit(f"kreward serve: {e}")

    def ready(s):
        host, port = s.servers[0].sockets[0].getsockname()[:2]
        mode = ("compile only: candidates that compile are not judged" if server.compile_only
                else "GPU")
        print(f"kreward serve: listening on http://{host}:{port} "
              f"({len(server.registry.names())} problems, {mode})", flush=True)

    serve(server, host=args.host, port=args.port, log_level=args.log_level, ready=ready)
    return 0


def _server(args, problems, token, pool_options):
    return Server(Options(problems=problems, reward=args.reward, preset=args.preset,
                          token=token, max_body=args.max_body,
                          max_queue=args.max_queue, max_batch=args.max_batch,
                          collectors=args.collectors, gpus=args.gpus, require_gpu=True,
                          pool_options=pool_options, compile_only=args.compile_only,
                          drain_timeout=args.drain_timeout, result_grace=args.result_grace,
                          kernelbench=kernelbench_options(args)))


if __name__ == "__main__":
    sys.exit(main())
