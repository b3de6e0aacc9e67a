"""One timed batch of a ModelNew evaluation, as the Runner (runner.py) runs
it for either side, the candidate's worker or the reference's:
- its inputs made here (the bits the checks regenerate), masked with a
  fresh key and staged in the worker's input region (inputs.py), so nothing
  the worker can read carries a value before `go` brings the key;
- the calls back to back on the caller's clock (`go`), the worker's
  commitment to its outputs made inside it;
- some calls, drawn after the batch ran, fetched and checked against the
  reference run here on regenerated inputs (`_check`);
- where the time went (`ops_s`: each request's seconds, and this
  process's own steps).
Batches is the Runner's base class: these methods use the Runner's layouts,
device, reference and timeouts."""
import base64
import collections
import random
import time

import torch

from .inputs import digest, fingerprint, make_inputs, mask, new_key, region_offsets, stage_call
from .worker_process import _failure

STAGE_CHUNK = 256 << 20   # bytes of a batch's inputs made, masked and copied at once (_write_region)
# a GPU worker's own device buffer (cuda_ipc.py), through which a masked
# chunk reaches it in pieces of this size at most: one per worker, on the
# caller's GPU, so small (a piece costs a request, ~0.1-0.3 ms)
SHARED_BYTES = 32 << 20

def _printable(text):
    """A worker's words (the candidate's to choose) as one line of plain
    characters, for a result's text."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


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


# which calls of a timed batch are checked: the OS's randomness, never
# derivable from anything the worker sees
_PICKS = random.SystemRandom()


class Batches:
    """The batch half of Runner (runner.py), which sets what these read:
    imp, layouts, device, ref, inputs_from, staged, call_timeout_s."""

    def __init__(self):
        # the caller's own seconds per step of the timed batches (the
        # inputs made and masked, the reference run for the checks), beside
        # the workers' requests (WorkerProcess.op_s): results' ops_s
        self._caller_s = collections.Counter()
        self._staging_s = 0.0  # of a _write_region's time, its stage requests'

    def _golden(self, case, seed, lifted):
        t0 = time.perf_counter()
        inputs = make_inputs(self.layouts[case], seed, self.device)
        want = self.ref(case, inputs, lifted=lifted)
        got = want, digest(list(inputs.values()))
        self._caller_s["golden"] += time.perf_counter() - t0
        return got

    def _check(self, w, case, seed, lifted, where, committed=None):
        shared = self._fetch_buffer(w)
        reply, payload = self._fetch(w, seed, shared)
        if not reply["ok"]:
            return f"{where}: {reply['error']}"
        want, want_digest = self._golden(case, seed, lifted)
        if reply["input_digest"] != want_digest:
            return f"{where}: the inputs changed (the candidate wrote them, or made other inputs)"
        got_meta = reply["outputs"]
        if len(got_meta) != len(want):
            return f"{where}: {len(got_meta)} outputs, the reference has {len(want)}"
        off, view = 0, memoryview(payload)
        for k, (m, ref) in enumerate(zip(got_meta, want)):
            if "shape" not in m:
                return f"{where}: output {k} is a {m['type']}, not a tensor"
            raw = view[off:off + m["nbytes"]]
            if off % 16:
                raw = bytearray(raw)  # after an output of odd size: aligned again
            off += m["nbytes"]
            if tuple(m["shape"]) != tuple(ref.shape):
                return f"{where}: output {k} has shape {tuple(m['shape'])}, the reference {tuple(ref.shape)}"
            dt = getattr(torch, m["dtype"], None)
            if shared is not None:  # its size checked against the reference's shape first
                got = self._pull(w, shared, k, m["nbytes"], ref.device).view(dt).reshape(m["shape"])
            else:
                if len(raw) != m["nbytes"]:  # (check_reply makes them add up)
                    return f"{where}: output {k} came with {len(raw)} of its {m['nbytes']} bytes"
                got = (torch.frombuffer(raw, dtype=torch.uint8).view(dt).reshape(m["shape"])
                       if len(raw) else torch.empty(m["shape"], dtype=dt))
                got = got.to(ref.device)  # compared where the reference is (a GPU's is fast)
            # the bytes the batch committed to before its clock stopped (worker.py go)
            if committed is not None and (k >= len(committed) or committed[k] != fingerprint(got)[:2]):
                return (f"{where}: output {k} is not what the batch had made when its clock "
                        "stopped (computed after the batch)")
            if ref.is_floating_point():
                ok = torch.allclose(got.to(ref.dtype), ref, atol=self.imp.atol, rtol=self.imp.rtol)
            else:
                ok = torch.equal(got.to(ref.dtype), ref)
            if not ok:
                diff = (got.double() - ref.double()).abs()
                return (f"{where}: output {k} differs from the reference (max abs diff "
                        f"{diff.max().item():.4g}, atol={self.imp.atol}, rtol={self.imp.rtol})")
        return None

    def _write_region(self, w, case, seeds):
        """The batch's inputs made here (on this runner's device, the bits
        the checks regenerate), masked with the batch's fresh key in a
        buffer of this process before they reach the worker (inputs.py):
        nothing the worker can read carries a value before go brings the
        key. A GPU worker gets them staged (_put): through a device buffer
        of its own (cuda_ipc.py) where it can, else through the region.
        Returns the key for go (base64)."""
        t0 = time.perf_counter()
        self._staging_s = 0.0  # (a batch that raised left its count)
        where, spans, total = region_offsets(self.layouts[case], len(seeds))
        key = new_key(self.device)
        if not total:  # every input empty: nothing to write (frombuffer refuses a count of 0)
            return base64.b64encode(key.raw).decode()
        # consecutive calls' spans (contiguous in the region) are made in
        # one buffer of up to STAGE_CHUNK bytes here, then masked and handed
        # over at once: one mask launch and one copy a chunk, not a call
        # (16b7c39: ~5 ms a call of 1.5 MB on the H200, most of a batch's
        # overhead). The keystream is by position in the region, so a chunk
        # masked whole is each span masked at its start, as the worker
        # unmasks it. Made and masked in memory no worker maps (a worker
        # reads its shared buffer whenever it likes: only masked bytes go
        # there, helper-35)
        stage = torch.zeros(min(total, max(STAGE_CHUNK, max(e - s for s, e in spans))),
                            dtype=torch.uint8, device=self.device)
        lo = hi = None  # the region's bytes the stage holds

        def flush(last):
            mask(stage[:hi - lo], key, lo)
            self._put(w, stage[:hi - lo], lo)
            if not last:  # padding between tensors: zeros, never this process's old memory
                stage[:hi - lo].zero_()

        for seed, at, (start, end) in zip(seeds, where, spans):
            if end == start:
                continue
            if lo is not None and end - lo > stage.numel():
                flush(last=False)
                lo = None
            if lo is None:
                lo = start
            stage_call(stage, at, make_inputs(self.layouts[case], seed, self.device), base=lo)
            hi = end
        if lo is not None:
            flush(last=True)
        # the stage requests are the worker's (ops_s "stage"), not counted twice
        self._caller_s["write_region"] += time.perf_counter() - t0 - self._staging_s
        return base64.b64encode(key.raw).decode()

    def _put(self, w, chunk, at):
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
                                 f"{_printable(r['error'])[:300]})")
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

    def _fetch_buffer(self, w):
        """w's shared buffer where its outputs come back through it (once
        its inputs went through it: staging "ipc"), else None (the pipe).
        Read once per fetch: end() in another thread, a Runner closed,
        drops w.shared."""
        return w.shared if self.staged and w.staging == "ipc" else None

    def _fetch(self, w, seed, shared=None):
        """A call's outputs (fetch), by its number where the worker has call
        numbers instead of seeds; with w's shared buffer, their
        descriptions only (the bytes: _pull)."""
        req = {"op": "fetch", "seed": getattr(w, "call_ids", {}).get(seed, seed)}
        if shared is not None:
            req["ipc"] = {"bytes": shared.nbytes}
        return w.request(req, self.call_timeout_s)

    def _fetch_unchecked(self, w, seed):
        """A call's outputs fetched as _check fetches them, not compared (the
        reference's side: both sides run the same requests)."""
        shared = self._fetch_buffer(w)
        r, _ = self._fetch(w, seed, shared)
        if not r["ok"]:
            raise _failure(r)
        for k, m in enumerate(r["outputs"] if shared is not None else ()):
            if "shape" in m:
                self._pull(w, shared, k, m["nbytes"], self.device)

    def _pull(self, w, shared, k, n, device):
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

    def _batch(self, w, case, seeds, lifted=None, committed=None, preps=None):
        """One batch: fresh inputs made (untimed), then the calls on the
        caller's clock; (wall us, worker's own us) per call. committed: a
        dict that gets each seed's commitment (the sums of its outputs,
        made inside the clock). preps: a list that gets the prepare
        request's time per call (recorded: the candidate's process could
        compute the batch's outputs there, its inputs made)."""
        region = self.inputs_from == "caller"
        # with the region the worker gets call numbers, never the seeds (it
        # could make the values from them, outside the clock)
        w.call_ids = {s: i for i, s in enumerate(seeds)} if region else {}
        req = {"op": "prepare", "case": case, "commit": True, "region": region,
               "staged": region and self.staged,
               "seeds": list(range(len(seeds))) if region else seeds}
        if lifted is not None:
            req["lifted"] = lifted
        tp = time.perf_counter()
        r, _ = w.request(req, self.call_timeout_s * len(seeds))
        if not r["ok"]:
            raise _failure(r)
        go = {"op": "go", "case": case}
        if region:
            go["key"] = self._write_region(w, case, seeds)
        if preps is not None:
            preps.append((time.perf_counter() - tp) * 1e6 / len(seeds))
        t0 = time.perf_counter()
        r, _ = w.request(go, self.call_timeout_s * len(seeds))
        wall = time.perf_counter() - t0
        if not r["ok"]:
            raise _failure(r)
        if len(r.get("committed") or ()) != len(seeds):
            raise RuntimeError("the batch committed to no outputs")
        if committed is not None:
            committed.update(zip(seeds, r["committed"]))
        t, _ = w.request({"op": "times"}, self.call_timeout_s)
        if not t["ok"]:
            raise _failure(t)
        return wall * 1e6 / len(seeds), t["event_us"] / len(seeds)

    def _warmup(self, w, calls, rng, lifted=None):
        """A batch whose time is only an estimate (lazy initialisation,
        clocks, caches): per-call wall us."""
        try:
            wall, _ = self._batch(w, 0, [rng.getrandbits(62) for _ in range(calls)], lifted)
            w.request({"op": "drop"}, self.call_timeout_s)
        except BaseException:
            w.release_region()  # no timed batches follow to free them (a kept baseline worker)
            raise
        return wall  # the region's pages stay for the timed batches (_timed frees them)

    def _timed(self, w, batches, calls, checks, rng, lifted=None, check=None, preps=None):
        """Timed batches, each followed by `checks` fetches of calls drawn
        after it ran (check(seed, batch) says what is wrong with one, or
        None; without check the outputs are fetched and not compared, so
        both sides run the same requests). (wall, events, why). The input
        region's pages are freed at the end, not after each batch: a page
        the kernel must find again costs 7x a resident one's write (0.33
        s/GiB against 0.047 on this project's machine), and was most of a
        large batch's staging on the H200 (16b7c39: write_region 10.7 s of
        the 4096^2 relu's 16.2 s timed phase)."""
        try:
            return self._timed_batches(w, batches, calls, checks, rng, lifted, check, preps)
        finally:
            w.release_region()

    def _timed_batches(self, w, batches, calls, checks, rng, lifted, check, preps):
        wall, events = [], []
        for i in range(batches):
            seeds = [rng.getrandbits(62) for _ in range(calls)]
            committed = {}
            per_call, ev = self._batch(w, 0, seeds, lifted, committed, preps)
            wall.append(per_call)
            events.append(ev)
            # drawn after the batch ran, by a generator the seeds say nothing
            # about (the seeds' own Mersenne Twister can be recovered from
            # a few hundred of them, which would tell the calls checked)
            for s in _PICKS.sample(seeds, min(checks, calls)):
                if check:
                    why = check(s, i, committed[s])
                    if why:
                        return wall, events, why
                else:
                    self._fetch_unchecked(w, s)
            w.request({"op": "drop"}, self.call_timeout_s)
        return wall, events, None

    def _clocks_reset(self, w):
        w.op_s.clear()
        self._caller_s.clear()

    def _clocks_read(self, w):
        """Seconds per step since _clocks_reset: each request to worker w
        by op (its wall time here, the worker's work inside), and the
        caller's own write_region and golden: where a side's warmup and
        timed batches spent their time."""
        steps = {**w.op_s, **self._caller_s}
        return {k: round(v, 4) for k, v in sorted(steps.items(), key=lambda kv: -kv[1])}
