"""The Evaluator protocol: what a trainer adapter, an environment or the CLI
may ask of any backend, and what every backend answers with. Three
implement it: backends/local.py (Evaluator: this machine's workers, one
rail for both kinds of problem), backends/http.py (Client: a `kreward
serve`), backends/ray.py (RayPool: a Ray cluster's actors); kreward.backend
.resolve() picks one. Tests give stand-ins with the same methods (the
adapters check the methods, not the class).

    evaluate(problem, source, name=...)       -> report
    evaluate_completion(problem, completion)  -> report (the answer's code
                                                 read for the problem's kind)
    evaluate_batch(problems, sources)         -> [report], in order
    await evaluate_async(problem, source)     -> report, never blocking the loop
    score_of(report)                          -> the reward; for a report that
                                                 was not judged None, or the
                                                 `fallback` a caller asked for
                                                 by name
    no_code(why=None, kind=None)              -> the compile_error report of a
                                                 completion without code
    close()                                    (also a context manager)

A problem is either kind (kreward.problems): a kreward problem's
problem.json path, JSON or dict, or a KernelBench file's path, text or
registered name. A report reads the same from every backend (verdict,
flags, metrics by [key] and get, text(key), feedback, message, reward: None
when the candidate was not judged, to_dict, to_json, close): a
kreward.Report locally, a kreward.report_data.ReportData from a remote one.
Every candidate gets exactly one report; a candidate that could not be
judged never gets a number (reward None, and the text "unavailable" where
nothing here can judge that kind)."""
import asyncio


class Backend:
    """The protocol's shared half: score_of, evaluate_async (in a thread) and
    the context manager. A backend sets `fallback` and implements evaluate,
    evaluate_completion, evaluate_batch, no_code and close."""
    fallback = None  # no number for what was not judged, unless asked for

    def evaluate(self, problem, source, name="candidate.cu"):
        raise NotImplementedError

    def evaluate_completion(self, problem, completion):
        raise NotImplementedError

    def evaluate_batch(self, problems, sources):
        raise NotImplementedError

    async def evaluate_async(self, problem, source, name="candidate.cu"):
        return await asyncio.to_thread(self.evaluate, problem, source, name)

    def no_code(self, why=None, kind=None):
        raise NotImplementedError

    def score_of(self, report):
        """The reward; for a candidate that could not be judged (no GPU, an
        environment error) None, or the fallback set by name."""
        r = report.reward
        return self.fallback if r is None else r

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def is_backend(obj):
    """Whether obj answers the protocol's calls the adapters make."""
    return all(callable(getattr(obj, m, None)) for m in ("evaluate", "evaluate_batch", "score_of"))
