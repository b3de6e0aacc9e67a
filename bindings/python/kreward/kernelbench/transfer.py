"""How a batch's inputs reach a ModelNew worker and a call's outputs come
back, for either side (the candidate's worker or the reference's):
- in: the batch's inputs made here (the bits the checks regenerate),
  masked with a fresh key in memory no worker maps, then written to the
  worker's input region or copied through its own shared device buffer
  (cuda_ipc.py) and staged (inputs.py), so nothing the worker can read
  carries a value before `go` brings the key (write_region, put);
- out: a call's outputs fetched over the pipe, or described by the fetch
  and copied out of the worker's shared buffer a piece at a time into
  memory of this process (fetch, pull).
What to do with the outputs is verification.py's; when batches run,
timing.py's. A Transfer takes everything it reads when it is made."""
import base64
import time

import torch

from .inputs import mask, new_key, region_offsets, stage_call
from .worker_process import _failure, printable

STAGE_CHUNK = 256 << 20   # bytes of a batch's inputs made, masked and copied at once (write_region)


def _with_buffer(shared, copy, done):
    """copy(shared.tensor) under the buffer's lock, waited for (done: the
    stream's synchronize, None on the CPU) before the lock is let go: a
    close() from another thread frees the buffer only between copies, and
    the worker touches it only after this returns."""
    with shared.lock:
        if shared.tensor is None:
            raise RuntimeError("the worker's shared buffer was freed: the Runner was closed")
        copy(shared.tensor)
        if done:
            done()


class Transfer:
    """Inputs in and outputs out for the workers of one problem.

    layouts: the input tensors of each case (inputs.make_inputs); device:
    where the inputs are made and masked (this process's); staged: whether
    a worker copies its inputs to its device (a GPU's way; the CPU's
    tensors are views of the region itself); call_timeout_s: a stage or
    fetch request's limit; caller_s: a Counter that gets this process's own
    seconds ("write_region"), beside the workers' requests (timing.py
    clocks); chunk_bytes: a batch's inputs are made and masked here this
    many bytes at a time at most (STAGE_CHUNK at least: the Runner's
    piece_bytes, so a chunk fills a worker's larger buffer)."""

    def __init__(self, *, layouts, device, staged, call_timeout_s, caller_s, chunk_bytes=None):
        self.layouts, self.device, self.staged = layouts, device, staged
        self.chunk_bytes = max(STAGE_CHUNK, chunk_bytes or 0)
        self.call_timeout_s, self.caller_s = call_timeout_s, caller_s
        self._staging_s = 0.0  # of a write_region's time, its stage requests'

    def write_region(self, w, case, seeds):
        """The batch's inputs made here (on this runner's device, the bits
        the checks regenerate), masked with the batch's fresh key in a
        buffer of this process before they reach the worker (inputs.py):
        nothing the worker can read carries a value before go brings the
        key. A GPU worker gets them staged (put): through a device buffer
        of its own (cuda_ipc.py) where it can, else through the region.
        Returns the key for go (base64)."""
        t0 = time.perf_counter()
        self._staging_s = 0.0  # (a batch that raised left its count)
        where, spans, total = region_offsets(self.layouts[case], len(seeds))
        key = new_key(self.device)
        if not total:  # every input empty: nothing to write (frombuffer refuses a count of 0)
            return base64.b64encode(key.raw).decode()
        # consecutive calls' spans (contiguous in the region) are made in
        # one buffer of up to chunk_bytes here, then masked and handed
        # over at once: one mask launch and one copy a chunk, not a call
        # (16b7c39: ~5 ms a call of 1.5 MB on the H200, most of a batch's
        # overhead). The keystream is by position in the region, so a chunk
        # masked whole is each span masked at its start, as the worker
        # unmasks it. Made and masked in memory no worker maps (a worker
        # reads its shared buffer whenever it likes: only masked bytes go
        # there, helper-35)
        # (stage_call writes every byte of a call's span, its tensors'
        # padding as zeros: a reused stage is not cleared between chunks,
        # 2 GB of memset a batch of the 4096^2 problems)
        stage = torch.empty(min(total, max(self.chunk_bytes, max(e - s for s, e in spans))),
                            dtype=torch.uint8, device=self.device)
        lo = hi = None  # the region's bytes the stage holds

        def flush():
            mask(stage[:hi - lo], key, lo)
            self.put(w, stage[:hi - lo], lo)

        for seed, at, (start, end) in zip(seeds, where, spans):
            if end == start:
                continue
            if lo is not None and end - lo > stage.numel():
                flush()
                lo = None
            if lo is None:
                lo = start
            stage_call(stage, at, self.layouts[case], seed, self.device, base=lo)
            hi = end
        if lo is not None:
            flush()
        # the stage requests are the worker's (ops_s "stage"), not counted twice
        self.caller_s["write_region"] += time.perf_counter() - t0 - self._staging_s
        return base64.b64encode(key.raw).decode()

    def put(self, w, chunk, at):
        """A masked chunk, the region's bytes from `at` on, handed to w:
        through its own device buffer (w.shared, cuda_ipc.py) a piece at a
        time, copied there and staged from it, device to device; or copied
        into the region and, for a GPU worker, staged from there. The first
        stage from the buffer that w cannot do (its driver refused the
        descriptor: said in w.staging) turns w to the region for good."""
        n = chunk.numel()
        # (end() in another thread, a Runner closed, drops w.shared: read once)
        shared = w.shared if self.staged else None
        if shared is not None and w.staging in (None, "ipc"):
            step = shared.nbytes
            # the bytes there before the worker reads them: this stream's
            # work only (a trainer's other streams on the GPU go on)
            done = torch.cuda.current_stream(chunk.device).synchronize if chunk.is_cuda else None
            for off in range(0, n, step):
                m = min(step, n - off)
                _with_buffer(shared, lambda buf: buf[:m].copy_(chunk[off:off + m]), done)
                r = self._stage(w, {"op": "stage", "at": at + off, "n": m, "ipc": {"bytes": shared.nbytes}})
                if not r["ok"]:
                    if w.staging == "ipc":  # it worked before: this is the worker failing
                        raise _failure(r)
                    w.staging = ("host (the worker could not map its shared buffer: "
                                 f"{printable(r['error'])[:300]})")
                    break
                w.staging = "ipc"
            else:
                return
        region = torch.frombuffer(w.region, dtype=torch.uint8, count=at + n)
        region[at:].copy_(chunk)
        if self.staged:  # to the worker's device, still masked
            r = self._stage(w, {"op": "stage", "at": at, "n": n})
            if not r["ok"]:
                raise _failure(r)

    def _stage(self, w, req):
        t0 = time.perf_counter()
        try:
            return w.request(req, self.call_timeout_s)[0]
        finally:
            self._staging_s += time.perf_counter() - t0

    def fetch_buffer(self, w):
        """w's shared buffer where its outputs come back through it (once
        its inputs went through it: staging "ipc"), else None (the pipe).
        Read once per fetch: end() in another thread, a Runner closed,
        drops w.shared."""
        return w.shared if self.staged and w.staging == "ipc" else None

    def fetch(self, w, seed, shared=None):
        """A call's outputs (fetch), by its number where the worker has call
        numbers instead of seeds; with w's shared buffer, their
        descriptions only (the bytes: pull)."""
        req = {"op": "fetch", "seed": w.call_ids.get(seed, seed)}
        if shared is not None:
            req["ipc"] = {"bytes": shared.nbytes}
        return w.request(req, self.call_timeout_s)

    def fetch_unchecked(self, w, seed):
        """A call's outputs fetched as verification.py's check fetches them,
        not compared (the reference's side: both sides run the same
        requests)."""
        shared = self.fetch_buffer(w)
        r, _ = self.fetch(w, seed, shared)
        if not r["ok"]:
            raise _failure(r)
        for k, m in enumerate(r["outputs"] if shared is not None else ()):
            if "shape" in m:
                self.pull(w, shared, k, m["nbytes"], self.device)

    def pull(self, w, shared, k, n, device):
        """Output k of w's last fetch (n bytes) into memory of this process
        on `device`, through w's shared buffer a piece at a time: the
        worker copies a piece in, this process copies it out before asking
        for the next. What is checked is this private copy, which nothing
        of the worker can change afterwards (the shared buffer it can
        write at any time). Device to device on a GPU: over the pipe a
        checked call's 64 MB output cost ~0.6 s (l2norm's fetch, 92d16fc);
        the other way, staging 64 MB a call through the buffer took 0.03 s
        where the host region took 1.8 (00f00f2). This way is not yet
        timed on a GPU."""
        out = torch.empty(n, dtype=torch.uint8, device=device)
        done = torch.cuda.current_stream(out.device).synchronize if out.is_cuda else None
        step = shared.nbytes
        for off in range(0, n, step):
            m = min(step, n - off)
            r, _ = w.request({"op": "fetch_piece", "output": k, "at": off, "n": m,
                              "ipc": {"bytes": shared.nbytes}}, self.call_timeout_s)
            if not r["ok"]:
                raise _failure(r)
            # copied out before the worker writes the next piece
            _with_buffer(shared, lambda buf: out[off:off + m].copy_(buf[:m]), done)
        return out
