"""Between the event loop and the rail (kreward/rail.py: the C pool and the
ModelNew scheduler behind the Pool's interface): a bounded queue, collector
threads and draining.

The event loop never calls into the library: submissions run on a small
thread pool (resolving a problem parses JSON; kr_pool_submit copies the
source), and reports are collected by `collectors` threads calling
Pool.next(), which waits in C with the GIL released; each report is handed
to the loop with call_soon_threadsafe. Several collectors because next()
claims the oldest pending ticket and waits for it: with one collector, a
report that finishes early waits for the slowest older one, with N the
oldest N are watched at once.

Accepted jobs are counted from acceptance to report (`inflight`); a request
that would take it past `max_queue` is refused whole (QueueFull, HTTP 429
with a Retry-After from the recent completion rate), so an accepted request
always gets every report. After drain() starts, new work is refused
(Draining, HTTP 503) while accepted jobs finish; close() frees the pool,
which hands jobs still pending a report with verdict error ("the pool was
freed"), so even then no accepted job goes without one."""
import asyncio
import collections
import concurrent.futures
import math
import threading
import time

from ..core import Report
from ..backends.local import no_code_report


class QueueFull(Exception):
    def __init__(self, retry_after):
        super().__init__(f"the queue is full; retry after {retry_after} s")
        self.retry_after = retry_after


class Draining(Exception):
    pass




class Engine:
    def __init__(self, pool, max_queue=1024, collectors=4, submit_threads=2):
        self.pool = pool
        self.max_queue = max_queue
        self._cond = threading.Condition()
        self._waiting = {}          # ticket -> (loop, future)
        self.inflight = 0           # accepted, report not yet delivered
        self.draining = False
        self._stopping = False
        self._done_times = collections.deque(maxlen=256)
        self.counters = collections.Counter()
        self.verdicts = collections.Counter()
        self.job_seconds = 0.0
        self._submitter = concurrent.futures.ThreadPoolExecutor(submit_threads,
                                                                thread_name_prefix="kreward-submit")
        self._collectors = [threading.Thread(target=self._collect, name=f"kreward-collect-{i}",
                                             daemon=True) for i in range(collectors)]
        for t in self._collectors:
            t.start()

    # ---- accepting ----
    def _retry_after(self, over):
        """Seconds until `over` jobs have likely finished, from the rate of
        the last completions (1 to 60)."""
        times = self._done_times
        if len(times) >= 2 and times[-1] > times[0]:
            rate = (len(times) - 1) / (times[-1] - times[0])
            return max(1, min(60, math.ceil(over / rate)))
        return 1

    def _reserve(self, n):
        with self._cond:
            if self.draining:
                self.counters["rejected_draining"] += 1
                raise Draining()
            if self.inflight + n > self.max_queue:
                self.counters["rejected_full"] += 1
                raise QueueFull(self._retry_after(self.inflight + n - self.max_queue))
            self.inflight += n
            self.counters["accepted"] += n

    async def run(self, jobs):
        """Reports (JSON text) for Jobs, in order. Raises QueueFull or
        Draining before anything is queued."""
        return await asyncio.gather(*self.submit(jobs))

    def submit(self, jobs):
        """Futures of the Jobs' reports (JSON text), in order; must be called
        on the event loop. Raises QueueFull or Draining before anything is
        queued."""
        loop = asyncio.get_running_loop()
        self._reserve(len(jobs))
        futures = [loop.create_future() for _ in jobs]
        self._submitter.submit(self._submit, loop, jobs, futures)
        return futures

    def _submit(self, loop, jobs, futures):
        for job, fut in zip(jobs, futures):
            if job.source is None:
                self._deliver(loop, fut, self._no_code(job), 0.0, "compile_error")
                continue
            try:
                with self._cond:  # a collector must find the ticket once next() returns it
                    ticket = self.pool.submit(**job.submit_args())
                    self._waiting[ticket] = (loop, fut, time.monotonic())
                    self._cond.notify()
            except Exception as e:  # the pool closed under us: a report all the same
                self._deliver(loop, fut, _error_report(f"not submitted: {e}"), 0.0, "error")

    @staticmethod
    def _no_code(job):
        r = no_code_report(job.reward, kind=job.kind)
        text = r.to_json()
        r.close()
        return text

    # ---- collecting ----
    def _collect(self):
        while True:
            with self._cond:
                while not self._waiting:
                    if self._stopping:
                        return
                    self._cond.wait(0.5)
            try:
                ticket, report = self.pool.next(timeout=0.5)
                verdict, text = report.verdict, report.to_json()
                report.close()
            except TimeoutError:
                continue
            except LookupError:  # every pending ticket is another collector's
                with self._cond:
                    self._cond.wait(0.01)
                continue
            except Exception as e:  # a term's or golden's exception, raised with its report
                ticket, report = getattr(e, "ticket", None), getattr(e, "report", None)
                if ticket is None or report is None:
                    raise
                report.set_text("message", f"scoring failed: {e}")
                verdict, text = report.verdict, report.to_json()
                report.close()
            with self._cond:
                loop, fut, t0 = self._waiting.pop(ticket)
            self._deliver(loop, fut, text, time.monotonic() - t0, verdict)

    def _deliver(self, loop, fut, text, seconds, verdict):
        with self._cond:
            self.verdicts[verdict] += 1
            self.inflight -= 1
            self._done_times.append(time.monotonic())
            self.counters["reported"] += 1
            self.job_seconds += seconds
            self._cond.notify_all()
        loop.call_soon_threadsafe(_resolve, fut, text)

    # ---- stopping ----
    def drain(self):
        """New work is refused from now on; accepted jobs go on."""
        with self._cond:
            self.draining = True

    def idle(self):
        with self._cond:
            return self.inflight == 0

    def close(self):
        """Frees the pool (jobs still pending get an error report, delivered
        to their requests) and stops the collectors once every accepted job
        has its report."""
        self.drain()
        self._submitter.shutdown(wait=True)
        self.pool.close()
        with self._cond:
            while self.inflight:
                self._cond.wait(0.5)
            self._stopping = True
            self._cond.notify_all()
        for t in self._collectors:
            t.join()


def _resolve(fut, text):
    if not fut.done():  # a request cancelled by its client: the report is dropped
        fut.set_result(text)


def _error_report(message):
    r = Report()
    r.verdict = "error"
    r.set_text("message", message)
    text = r.to_json()
    r.close()
    return text
