"""Whether the GPU is idle before a timed phase (gate.py, in-flight lanes):
what a frozen worker queued before its SIGSTOP (freezer.py) still runs.

The probe: a one-element kernel on this process's own context, timed on
the host from launch to synchronize. On an idle GPU that is a launch and a
return (tens of us); while another context has work queued, the device
runs ours only at a time-slice switch (around a millisecond or more). It
waits until SETTLE probes in a row are fast, or BUDGET_S passed, and then
says so (the result's gate facts). A heuristic: host jitter reads as busy
(costing a wait, never a wrong result), and a kernel queued by a frozen
process that starts after the probe is not seen."""
import time

FAST_US = 300.0     # a probe under this: no other context's work in the way
SETTLE = 3          # fast probes in a row that count as idle
BUDGET_S = 0.25     # the longest the probe waits before it goes on, saying so


def idle_probe(device, fast_us=FAST_US, settle=SETTLE, budget_s=BUDGET_S):
    """A probe for gate.Gate: None once the GPU looks idle, else a note."""
    import torch

    state = {}

    def probe():
        with torch.cuda.device(device):
            x = state.get("x")
            if x is None:
                x = state["x"] = torch.zeros(1, device=device)
            return wait_idle(lambda: _one(torch, x), fast_us, settle, budget_s)
    return probe


def _one(torch, x):
    t0 = time.perf_counter()
    x.add_(1.0)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6


def wait_idle(measure, fast_us=FAST_US, settle=SETTLE, budget_s=BUDGET_S):
    """Calls measure() (microseconds of one probe) until `settle` in a row
    are under fast_us: None; or a note once budget_s passed."""
    end = time.monotonic() + budget_s
    row, slowest = 0, 0.0
    while True:
        us = measure()
        slowest = max(slowest, us)
        row = row + 1 if us < fast_us else 0
        if row >= settle:
            return None
        if time.monotonic() > end:
            return (f"the GPU did not look idle within {budget_s:g} s (probes up to {slowest:.0f} us, "
                    f"idle under {fast_us:g} us): a frozen worker's queued work may have run")
