"""Whether a ModelNew worker's outputs are the reference's:
- every case built and checked on fresh inputs (Verification.verify: the
  scaled cases catch code fitted to one shape);
- one call checked (Verification.check): its outputs fetched
  (transfer.py), compared with the reference's on the same inputs made
  here (golden), the worker's digest of its inputs after the call against
  this process's, and the outputs against what the batch committed to
  before its clock stopped;
- the baseline's worker on this process's GPU paths (check_baseline_paths:
  unmasking and committing inside its clock on a slower path would
  inflate the speedup).
A Verification takes everything it reads when it is made; the worker is an
argument of each call."""
import re
import time

import torch

from .gate import NO_GATE
from .inputs import digest, fingerprint, make_inputs


class Verification:
    """Checks against the reference Model run in this process.

    imp: the imported problem (its cases, atol, rtol); layouts: the input
    tensors of each case; device: where inputs are made and the reference
    runs; reference: reference.Reference; transfer: a transfer.Transfer
    (the fetches); timing: a timing.Timing (the batch verify runs);
    caller_s: the Counter this process's own steps go to ("golden");
    timeout_s: a build's limit; gate: the lane's GPU gate (gate.py), each
    case one shared step of it (NO_GATE: none); profile_go: each case's
    batch profiled in the worker (KR_PROFILE: where `go` spends its time,
    in the result's verify_go_profile by case)."""

    def __init__(self, *, imp, layouts, device, reference, transfer, timing, caller_s, timeout_s,
                 gate=NO_GATE, profile_go=False):
        self.imp, self.layouts, self.device, self.ref = imp, layouts, device, reference
        self.transfer, self.timing, self.caller_s, self.timeout_s = transfer, timing, caller_s, timeout_s
        self.gate, self.profile_go = gate, profile_go

    def golden(self, case, seed, lifted):
        t0 = time.perf_counter()
        inputs = make_inputs(self.layouts[case], seed, self.device)
        want = self.ref(case, inputs, lifted=lifted)
        got = want, digest(list(inputs.values()))
        self.caller_s["golden"] += time.perf_counter() - t0
        return got

    def verify(self, w, rng, verify_seeds, res):
        """Every case built and checked on verify_seeds fresh inputs: {case:
        lifted}, or None with the verdict in res."""
        lifted = {}
        for case, (name, _, _) in enumerate(self.imp.cases):
            # one case at a time between the lane's timed phases (gate.py):
            # its requests, and this process's inputs and golden outputs on
            # the GPU, all done before another candidate's clock runs
            with self.gate.shared(w):
                if not self._verify_case(w, rng, verify_seeds, res, case, name, lifted):
                    return None
        return lifted

    def _verify_case(self, w, rng, verify_seeds, res, case, name, lifted):
        """One case of verify (lifted[case] set); False with the verdict in res."""
        b, _ = w.request({"op": "build", "case": case}, self.timeout_s)
        if not b["ok"]:
            # ModelNew(...) raised: the candidate's outcome (a claim of
            # the sandbox failing is its to write by now: worker_process
            # _failure)
            res.update(verdict="denied" if b.get("denied") else "crash",
                       feedback=("refused by the sandbox: " if b.get("denied") else "") +
                       f"case {name}: ModelNew(...): {b['error']}")
            return False
        lifted[case] = b["lifted"]
        seeds = [rng.getrandbits(62) for _ in range(verify_seeds)]
        profile = {} if self.profile_go else None
        self.timing.batch(w, case, seeds, profile=profile)
        if profile is not None:
            res.setdefault("verify_go_profile", {})[name] = profile
        for s in seeds:
            why = self.check(w, case, s, lifted[case], f"case {name}")
            if why:
                res.update(verdict="wrong", feedback=why)
                return False
        res["cases"].append({"name": name, "passed": True, "weights": "lifted" if lifted[case] else "seeded"})
        return True

    def check(self, w, case, seed, lifted, where, committed=None):
        """What is wrong with the call of `seed` in w's last batch (a line
        for the feedback), or None."""
        shared = self.transfer.fetch_buffer(w)
        reply, payload = self.transfer.fetch(w, seed, shared)
        if not reply["ok"]:
            return f"{where}: {reply['error']}"
        want, want_digest = self.golden(case, seed, lifted)
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
                got = self.transfer.pull(w, shared, k, m["nbytes"], ref.device).view(dt).reshape(m["shape"])
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


def path_rank(path):
    """How slow a GPU path (inputs.gpu_paths) is, in order. The mask: a
    Triton kernel ("triton choice N: ..." with N its place among the mask's
    kernels, best first; its compiled form launched directly before the
    same kernel through Triton's launch, which costs more host a call).
    The commitment: one launch a batch, then "triton" (a launch or more an
    output), then torch's steps; anything unknown, then nothing settled."""
    if path is None:
        return 1000
    if path == "torch steps":
        return 500
    commitment = {"triton, one launch a batch": 0, "triton": 1}
    if path in commitment:
        return commitment[path]
    m = re.match(r"triton choice (\d+):", path)
    if m:
        return 2 * int(m.group(1)) + (0 if path.endswith("direct launch)") else 1)
    return 999


def baseline_paths_differ(expected, got):
    """None, or how the baseline worker's GPU paths (got: its seal's
    gpu_paths) are slower than this process's (expected). Only slower
    counts: a faster baseline inflates nothing, and this process may itself
    have fallen back (a trainer's full GPU)."""
    want, got = expected, got or {}
    if not want:
        return None
    diff = [f"{k}: {got.get(k)!r}, here {want.get(k)!r}" for k in ("mask", "commitment")
            if path_rank(got.get(k)) > path_rank(want.get(k))]
    if not diff:
        return None
    why = f" ({got['mask_why']})" if got.get("mask_why") else ""
    return "; ".join(diff) + why


def check_baseline_paths(processes, expected, res):
    """The baseline's worker (processes: a processes.Processes) unmasks and
    commits inside its clock like the candidate's: on a slower path than
    this process chose (expected: torch's steps, the strided kernel,
    nothing settled) its time grows and the speedup with it. Such a worker
    is replaced now, the candidate gone; if the new one differs too, no
    speed credit. True when the baseline may be timed. Both sides' paths go
    in the result (the candidate's as it reports them: its process is its
    own)."""
    res.setdefault("gpu_paths", {})["expected"] = expected
    why = baseline_paths_differ(expected, processes.baseline_facts.get("gpu_paths"))
    if why:
        processes.end_baseline()
        processes.start_baseline()
        failed = processes.baseline_ready()
        why = failed or baseline_paths_differ(expected, processes.baseline_facts.get("gpu_paths"))
    res["gpu_paths"]["baseline"] = processes.baseline_facts.get("gpu_paths")
    if why:
        res["notes"].append(f"no speed credit: the baseline's worker did not unmask or commit "
                            f"the way this process does, twice ({why})")
        return False
    return True
