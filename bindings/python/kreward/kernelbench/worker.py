"""The ModelNew worker: a process of its own that loads one candidate
(Python host code, CUDA through load_inline, Triton) and runs it on inputs
it makes from seeds; the caller (runner.py) never runs candidate code.

Protocol on the worker's own pipe (fd given in argv; fd 1 goes to stderr
before the candidate is loaded, so its prints cannot forge replies): one
JSON line per request, one JSON line per reply, an optional binary payload
after a reply whose "bytes" says its length. Requests: load, build,
prepare, go, fetch, attribute, drop. The caller checks outputs and times
the batch from outside: nothing this process says about correctness is
believed, and its own timings are only compared with the caller's clock.

Sandbox (confine.py, through libkreward's kr_sandbox_enter, by path: the
package kreward is never imported here): with a config in argv[3] the
worker enters it before anything but the standard library is loaded
("start": every thread torch and CUDA start later is inside it; Landlock
does not reach threads that already run) or after torch and CUDA are up
("init"), always before the candidate's code: reads limited to Python's
trees, the toolkit, driver and loader files; writes only to the
candidate's own build folder; no network; exec allowed (inside the
sandbox) until the caller sends `seal`, after every case ran once (Triton
compiles at first launch). A refusal by the sandbox is answered with
"denied": the caller's verdict.

Imports torch, inputs.py and confine.py (by path): nothing of kreward."""
import ctypes
import errno
import hashlib
import importlib.util
import json
import os
import sys
import time
import traceback
import types


def _load_sibling(name):
    spec = importlib.util.spec_from_file_location(
        "kr_kb_" + name, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _denied(exc):
    """Whether an error is the sandbox's refusal: EACCES (Landlock) or EPERM
    (the filter) anywhere in its chain."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class Sandbox:
    """The worker's sandbox: phase one (exec allowed) entered at start or
    after init, phase two (`seal`, no exec) on request."""

    def __init__(self, config):
        self.config, self.status, self.error = config, None, None
        self.confine = _load_sibling("confine") if config else None

    def enter(self, exec_allowed):
        if not self.config or self.error:
            return
        try:
            c = self.config
            self.status = self.confine.enter(
                c["library"], self.confine.spec(c["write"], c["gpu"], exec_allowed))
        except Exception as e:  # the library missing, or a layer failing
            self.error = f"the sandbox could not be applied: {type(e).__name__}: {e}"

    def report(self):
        if not self.config:
            return {"applied": False, "why": "the runner asked for no sandbox"}
        return {"applied": self.status is not None, "when": self.config["when"], **(self.status or {})}


class Worker:
    def __init__(self, out, sandbox):
        self.sandbox = sandbox
        import torch
        self.torch, self.out, self.inputs = torch, out, _load_sibling("inputs")
        # the harness's own references, taken before the candidate can patch torch
        self.make_inputs, self.digest = self.inputs.make_inputs, self.inputs.digest
        self.perf = time.perf_counter
        self.models, self.batch = {}, {}

    def reply(self, obj, payload=b""):
        if payload:
            obj["bytes"] = len(payload)
        self.out.write((json.dumps(obj) + "\n").encode())
        self.out.write(payload)
        self.out.flush()

    def sync(self):
        if self.device != "cpu":
            self.torch.cuda.synchronize()

    def load(self, req):
        self.device, self.layouts = req["device"], req["layouts"]
        self.init_inputs, self.values = req["init_inputs"], req["values"]
        self.state_names, self.class_name = req["state_names"], req.get("class_name", "ModelNew")
        src = req["source"]
        digest = hashlib.sha256(src.encode()).hexdigest()[:24]
        # load_inline builds land in a directory named by the source's hash
        # (made by the caller, the only folder the sandbox lets this process
        # write): the same candidate again (another case, another seed) is
        # not rebuilt
        ext = os.path.join(req["cache_dir"], digest)
        cached = os.path.isdir(ext) and bool(set(os.listdir(ext)) - {"tmp"})
        os.makedirs(ext, exist_ok=True)
        os.environ["TORCH_EXTENSIONS_DIR"] = ext
        if self.sandbox.config and self.sandbox.config["when"] == "init":
            if self.device != "cpu":  # CUDA up before the sandbox: its files opened
                self.torch.cuda.init()
                self.torch.empty(1, device=self.device)
            self.sandbox.enter(exec_allowed=True)
        if self.sandbox.error:
            raise RuntimeError(self.sandbox.error)
        if self.device != "cpu" and "TRITON_LIBCUDA_PATH" not in os.environ:
            # Triton asks /sbin/ldconfig where libcuda is; the loaded one says
            self.torch.cuda.init()
            with open("/proc/self/maps") as maps:
                for line in maps:
                    if "/libcuda.so" in line:
                        os.environ["TRITON_LIBCUDA_PATH"] = os.path.dirname(line.split()[-1])
                        break
        t0 = self.perf()
        mod = types.ModuleType("candidate")
        mod.__file__ = os.path.join(ext, "candidate.py")
        exec(compile(src, "candidate.py", "exec"), mod.__dict__)
        self.cls = getattr(mod, self.class_name, None)
        if self.cls is None:
            raise LookupError(f"the candidate defines no class {self.class_name}")
        return {"compile_seconds": self.perf() - t0, "cached": cached, "hash": digest,
                "sandbox": self.sandbox.report()}

    def seal(self, req):
        """Phase two: no program can be started from here on."""
        if self.sandbox.config:
            self.sandbox.enter(exec_allowed=False)
            if self.sandbox.error:
                raise RuntimeError(self.sandbox.error)
        return {"sandbox": self.sandbox.report()}

    def build(self, req):
        case = req["case"]
        with self.torch.device(self.device):
            self.torch.manual_seed(0)  # KernelBench's convention: Model and ModelNew seeded alike
            model = self.cls(*self.init_inputs[case])
        names = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_buffers()}
        missing = [n for n in self.state_names if n not in names]
        self.models[case] = (model, not missing)
        return {"lifted": not missing, "missing": missing[:8]}

    def prepare(self, req):
        case, self.batch = req["case"], {}
        for seed in req["seeds"]:
            self.batch[seed] = [self.make_inputs(self.layouts[case], seed, self.device), None]
        self.sync()
        return {"prepared": len(self.batch)}

    def call(self, case, tensors):
        model, lifted = self.models[case]
        state, args = {}, dict((int(k), v) for k, v in self.values[case].items())
        for t in self.layouts[case]:
            if t["source"] == "input":
                args[t["index"]] = tensors[t["name"]]
            elif lifted:
                state[t["module_name"]] = tensors[t["name"]]
        call_args = tuple(args[i] for i in sorted(args))
        with self.torch.no_grad():
            if state:
                return self.torch.func.functional_call(model, state, call_args)
            return model(*call_args)

    def go(self, req):
        case, times = req["case"], []
        gpu = self.device != "cpu"
        for seed, entry in self.batch.items():
            if gpu:
                a, b = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
                a.record()
                entry[1] = self.call(case, entry[0])
                b.record()
                times.append((a, b))
            else:
                t0 = self.perf()
                entry[1] = self.call(case, entry[0])
                times.append(self.perf() - t0)
        self.sync()
        us = [a.elapsed_time(b) * 1e3 for a, b in times] if gpu else [t * 1e6 for t in times]
        return {"event_us": us}

    def fetch(self, req):
        inputs, out = self.batch[req["seed"]]
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        meta, blobs = [], []
        for o in outs:
            if not isinstance(o, self.torch.Tensor):
                meta.append({"type": type(o).__name__})
                continue
            host = o.detach().to("cpu").contiguous()
            raw = ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())
            meta.append({"shape": list(host.shape), "dtype": str(host.dtype).replace("torch.", ""),
                         "nbytes": len(raw)})
            blobs.append(raw)
        return {"outputs": meta, "input_digest": self.digest(list(inputs.values()))}, b"".join(blobs)

    def attribute(self, req):
        """One call under the profiler (CUPTI through kineto): the kernels it
        launched, with their GPU time."""
        from torch.profiler import ProfilerActivity, profile
        case = req["case"]
        tensors = self.make_inputs(self.layouts[case], req["seed"], self.device)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            self.call(case, tensors)
            self.sync()
        kernels = {}
        for e in prof.events():
            if e.device_type == self.torch.autograd.DeviceType.CUDA:
                k = kernels.setdefault(e.name, [0, 0.0])
                k[0] += 1
                k[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        return {"kernels": [{"name": n, "calls": c, "us": us} for n, (c, us) in kernels.items()]}

    def drop(self, req):
        self.batch = {}
        return {}

    def serve(self, inp):
        for line in inp:
            req = json.loads(line)
            op = req["op"]
            try:
                res = getattr(self, op)(req)
                payload = b""
                if isinstance(res, tuple):
                    res, payload = res
                self.reply({"ok": True, **res}, payload)
            except Exception as e:
                self.reply({"ok": False, "error": f"{type(e).__name__}: {e}",
                            "denied": self.sandbox.status is not None and _denied(e),
                            "sandbox_failed": bool(self.sandbox.error),
                            "trace": traceback.format_exc()[-2000:]})


def main():
    rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
    config = json.loads(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
    out = os.fdopen(wfd, "wb")
    inp = os.fdopen(rfd, "rb")
    os.dup2(2, 1)  # the candidate's prints go to stderr, never into the protocol
    sandbox = Sandbox(config)
    if config and config["when"] == "start":
        sandbox.enter(exec_allowed=True)  # before torch: one thread, the only one
    Worker(out, sandbox).serve(inp)


if __name__ == "__main__":
    main()
