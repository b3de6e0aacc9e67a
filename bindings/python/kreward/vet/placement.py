"""Where vetting runs a file's reference: on the host's GPUs, one file at
a time on each (two timings on one GPU disturb each other), or on the CPU.
Without a GPU the reference still runs on the CPU for what needs no clock
(determinism, tolerance headroom, duplicates), and the time limits are
reported unchecked, unless the CPU is asked for as the device (then it is
timed there, one file at a time)."""
import contextlib
import os
import threading


class Placement:
    """One measurement's device: torch_device inside the measuring process
    (which sees only visible_devices) and whether it times there."""

    def __init__(self, torch_device, visible_devices, times, why_not_timed=None):
        self.torch_device, self.visible_devices = torch_device, visible_devices
        self.times, self.why_not_timed = times, why_not_timed


class Devices:
    """devices: None (every GPU torch sees; without one, the CPU untimed),
    "cpu" (timed on the CPU), or a list of GPU indices. acquire() waits for
    a free one."""

    def __init__(self, devices=None):
        self.why_not_timed = None
        if devices is None:
            n = _gpu_count()
            devices = list(range(n))
            if not n:
                self.why_not_timed = ("no GPU here: the reference's time is measured on a GPU "
                                      "(--devices cpu times it on the CPU)")
        if devices == "cpu":
            self._free = ["cpu"]
        elif not devices:
            self._free = None  # untimed CPU runs: any number at once
        else:
            # torch's indices, as CUDA_VISIBLE_DEVICES of this process maps
            # them (a scheduler's 2,3 is torch's 0,1): the child is given
            # the device's own entry; one slot per device, so no two
            # measurements share one
            self._free = list(dict.fromkeys(int(d) for d in devices))
        self.names = (["cpu"] if not self._free or self._free == ["cpu"]
                      else [f"cuda:{d}" for d in self._free])
        # what the measurements depend on: a resumed run re-measures under another
        self.mode = ("untimed" if self._free is None else
                     "cpu" if self._free == ["cpu"] else "gpu")
        self._cond = threading.Condition()

    def parallel(self, jobs):
        """How many measurements can run at once: one per device, or `jobs`
        where nothing is timed."""
        return jobs if self._free is None else max(1, len(self._free))

    def describe(self):
        """The devices a run measures on, by name (a resumed run on other
        GPUs measures again)."""
        if self.mode != "gpu":
            return [self.mode]
        try:
            import torch
            return sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
        except Exception:  # noqa: BLE001
            return ["gpu"]

    @contextlib.contextmanager
    def acquire(self):
        if self._free is None:
            yield Placement("cpu", "", times=False, why_not_timed=self.why_not_timed)
            return
        with self._cond:
            while not self._free:
                self._cond.wait()
            slot = self._free.pop(0)
        try:
            if slot == "cpu":
                yield Placement("cpu", "", times=True)
            else:
                yield Placement("cuda:0", _visible_entry(slot), times=True)
        finally:
            with self._cond:
                self._free.append(slot)
                self._cond.notify()


def _visible_entry(index):
    """What CUDA_VISIBLE_DEVICES must say for a child to see this process's
    device `index` as its only one."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return str(index)
    if index >= len(visible):
        raise ValueError(f"device {index}: this process sees {len(visible)} GPU(s) "
                         f"(CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']})")
    return visible[index]


def _gpu_count():
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no usable torch: the CPU
        return 0
