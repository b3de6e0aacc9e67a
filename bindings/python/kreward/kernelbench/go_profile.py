"""Where a verify batch's seconds go inside a ModelNew worker's `go`
(worker.py; the caller asks with KR_PROFILE, docs/kernelbench.md). Loaded
by path as the worker's other siblings are: it imports nothing of kreward."""


class GoProfile:
    """Where a verify batch's seconds go inside `go` (the caller's
    KR_PROFILE; docs/kernelbench.md): each part (the unmasking, the weights'
    swap, the forward, the commitment) timed from a synchronised device to a
    synchronised device, and the whole request under cProfile, its heaviest
    functions as text. Diagnostics only: the caller bounds what comes back
    and judges nothing by it."""
    TOP = 25

    def __init__(self, worker):
        import cProfile
        self.w, self.parts, self.prof = worker, {}, cProfile.Profile()

    def timed(self, fn, name):
        w, parts = self.w, self.parts

        def run(*args, **kwargs):
            w.sync()
            t0 = w.perf()
            try:
                return fn(*args, **kwargs)
            finally:
                w.sync()
                parts[name] = parts.get(name, 0.0) + w.perf() - t0
        return run

    def start(self):
        self.prof.enable()

    def stop(self):
        self.prof.disable()

    def report(self, total_s):
        import io
        import pstats
        text = io.StringIO()
        pstats.Stats(self.prof, stream=text).sort_stats("cumulative").print_stats(self.TOP)
        return {"parts_s": {k: round(v, 6) for k, v in self.parts.items()},
                "total_s": round(total_s, 6), "top": text.getvalue()}
