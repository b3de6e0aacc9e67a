"""The ModelNew worker: a process of its own that loads one candidate
(Python host code, CUDA through load_inline, Triton) and runs it on inputs
it makes from seeds; the caller (runner.py) never runs candidate code.

Two processes per worker. The caller starts this file as the supervisor
(its loop in supervisor.py): a small process (standard library only, never
sandboxed, never runs candidate code) that makes itself a child subreaper
(PR_SET_CHILD_SUBREAPER)
and forks the worker in a session of its own. Every process the candidate
starts stays below the supervisor, whatever it does: a child that leaves
the worker's session (setsid) and loses its parent is re-parented to the
supervisor, not to init. On `reap` (from the caller, on the supervisor's
stdin) the supervisor kills its children until it has none left, then
answers with how many there were besides the worker (`strays`): the caller
times the baseline only once no process of the candidate is alive. EOF on
its stdin (the caller died) does the same.

Protocol on the worker's own pipe (fds given in argv; fd 1 goes to stderr
before the candidate is loaded, so its prints cannot forge replies): one
JSON line per request, one JSON line per reply, an optional binary payload
after a reply whose "bytes" says its length. Requests: ready, load, build,
seal, prepare, go, times, fetch, attribute, drop. The caller checks
outputs and times each batch (`go`) from outside: nothing this process says
about correctness is believed, and its own timings are only compared with
the caller's clock.

Sandbox (confine.py, through libkreward's kr_sandbox_enter, by path: the
package kreward is never imported here): with a config in argv[3] the
worker enters it before anything but the standard library is loaded
("start": every thread torch and CUDA start later is inside it; Landlock
does not reach threads that already run; a worker forked from the zygote,
zygote.py, has torch's modules already and enters it as its only thread,
before anything of its own runs); with the config in the `load`
request ("init"), after torch and CUDA are up, before the candidate's code
(so an "init" worker can be started before its candidate is known: the
runner's spare). Reads limited to Python's trees, the toolkit, driver and
loader files; writes only to the candidate's own build folder; no network;
exec allowed (inside the sandbox) until the caller sends `seal`, after
every case ran once (Triton compiles at first launch). A refusal by the
sandbox is answered with "denied": the caller's verdict.

Isolation (always, sandbox or not; libkreward's kr_sandbox_isolate, the
seccomp filter built in C with libseccomp, entered at `load` before the
candidate's code, every thread): the worker and everything it starts may
signal, re-prioritise, re-pin or trace only the worker itself (pid 0 or its
own pid), never another process: not the supervisor (which would end the
supervision), not the baseline's worker, not the caller.

Imports torch, inputs.py and confine.py (by path): nothing of kreward."""
import base64
import ctypes
import errno
import gc
import hashlib
import importlib.util
import json
import mmap
import os
import signal
import sys
import time
import traceback
import types

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _load_sibling(name):
    spec = importlib.util.spec_from_file_location(
        "kr_kb_" + name, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _denied(exc):
    """Whether an error is the sandbox's refusal: EACCES (Landlock), EPERM
    (the filter) or EFBIG (a file past its file_bytes limit: Python ignores
    SIGXFSZ, so the write fails) anywhere in its chain."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EFBIG):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option, arg):
    if _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"prctl({option}): {os.strerror(e)}")


# ---------------------------------------------------------------- isolation
def isolate(library):
    """Enters the isolation filter (libkreward's kr_sandbox_isolate, by path:
    a seccomp filter over every thread, inherited by everything started
    later); the status. A kernel without seccomp: applied False with why; a
    filter that failed to load: RuntimeError (no candidate runs then)."""
    return _load_sibling("confine").isolate(library)


# ------------------------------------------------------------------ sandbox
class Sandbox:
    """The worker's sandbox: phase one (exec allowed) entered at start or
    at load, phase two (`seal`, no exec) on request."""

    def __init__(self, config):
        self.config, self.status, self.error = config, None, None
        self.confine = _load_sibling("confine") if config else None

    def enter(self, exec_allowed):
        if not self.config or self.error:
            return
        try:
            c = self.config
            first = self.status
            self.status = self.confine.enter(
                c["library"], self.confine.spec(c["write"], c["gpu"], exec_allowed,
                                                first=first is None, reads=c.get("reads") or ()))
            if first is not None and "started before" not in first.get("landlock_why", ""):
                # the seal's layer counts the threads started before it
                # (CUDA's, the candidate's), but when the first layer had
                # every thread in it (as "start" does), so are they, under
                # the same file rules, and the seal's seccomp filter (exec
                # refused) reaches every thread: the H200 at d816279 said 17
                # outside after the seal. Where the first layer left threads
                # out ("init"), those may have started more: the seal's own
                # count stands
                self.status["landlock_why"] = first.get("landlock_why", "")
        except Exception as e:  # the library missing, or a layer failing
            self.error = f"the sandbox could not be applied: {type(e).__name__}: {e}"

    def report(self):
        if not self.config:
            return {"applied": False, "why": "the runner asked for no sandbox"}
        return {"applied": self.status is not None, "when": self.config["when"], **(self.status or {})}


# ------------------------------------------------------------------- worker
class Worker:
    def __init__(self, out, sandbox, region=None, shared_fd=None):
        """region: the input region the caller writes timed batches' inputs
        into (inputs.py), an mmap, or None (inputs made here). shared_fd:
        a descriptor of the caller's device buffer (cuda_ipc.py) that stage
        may copy them from instead, or None."""
        self.sandbox, self.region, self.shared_fd = sandbox, region, shared_fd
        import torch
        self.torch, self.out, self.inputs = torch, out, _load_sibling("inputs")
        # stage's shared buffer, mapped in ready (or why not)
        self.cuda_ipc, self.ipc, self.ipc_error = _load_sibling("cuda_ipc"), None, None
        # the harness's own references, taken before the candidate can patch
        # torch (it runs in this process): inputs, digests, the clock, the
        # call path, the plain tensor types
        self.make_inputs, self.digest = self.inputs.make_inputs, self.inputs.digest
        self.sums, self.sums_of_many = self.inputs.sums, self.inputs.sums_of_many
        self.sums_of_table = self.inputs.sums_of_table
        self.WeightSlots = _load_sibling("weight_slots").WeightSlots
        self.GoProfile = _load_sibling("go_profile").GoProfile  # (loaded before any seal)
        self.perf = time.perf_counter
        self.no_grad, self.functional_call = torch.no_grad, torch.func.functional_call
        self.plain = (torch.Tensor, torch.nn.Parameter)
        self.Tensor = torch.Tensor
        self.models, self.batch, self.order = {}, {}, []
        self.device, self.loaded = None, False
        self.commit = False  # the next `go` commits to its outputs (prepare's "commit")
        self.spans = None    # the calls' spans of the input region, when prepare used it
        self.staged = None   # the region's device copy (a flat uint8 tensor), when staged
        self.ready_failed = False  # a failed ready: load then runs no source
        self._sync, self.events, self.last_us = None, None, None
        self.commit_stream = None
        # attribution's tracer (kernel_trace.py), bound in ready before any
        # candidate code; None: torch.profiler (asked for, the CPU, or
        # CUPTI would not bind: tracer_why)
        self.tracer, self.tracer_why = None, None
        self.held = []
        self.fetched = []  # the last ipc fetch's outputs, bytes on the device (fetch_piece)
        # Triton's launchers: the signatures this worker's kernels needed
        # (installed in ready, said in seal) and those its ready built
        self.launchers = _load_sibling("triton_launchers")
        self.launcher_log, self.launchers_ready = None, []

    def reply(self, obj, payload=()):
        """payload: buffers written after the JSON line, in order."""
        size = sum(len(p) for p in payload)
        if size:
            obj["bytes"] = size
        self.out.write((json.dumps(obj) + "\n").encode())
        for p in payload:
            self.out.write(p)
        self.out.flush()

    def sync(self):
        if self._sync:
            self._sync()

    def ready(self, req):
        """CUDA up (before the sandbox in "init" mode: its files opened), so a
        worker started ahead of its candidate is ready when the candidate
        comes."""
        if self.sandbox.error:  # "start": entered before this, and failed
            raise RuntimeError(self.sandbox.error)
        # load refuses to run a source after a failed ready (a caller that
        # sent it anyway)
        self.ready_failed = True
        began_at = time.monotonic()  # (the caller's clock too: where a spare's start goes)
        ready_steps = {}  # the steps of ready outside the warm, seconds each
        t_step = self.perf()
        self.device = req["device"]
        self.inputs.use_library(req.get("library"))  # the region's mask of host memory
        warm_s = 0.0  # the CPU's libraries need no first call of their own
        warm_steps = {}  # each warm step's seconds (the spare's ready is on the next candidate's path)
        if self.device != "cpu":
            self.torch.cuda.init()
            # the worker's GPU current: the synchronisation, the events, the
            # commit stream and Triton's launches (the candidate's and the
            # unmask's) act on the current device, which is cuda:0 in a
            # fresh process whatever device the lane gave this worker
            if self.torch.device(self.device).index is not None:
                self.torch.cuda.set_device(self.torch.device(self.device))
            self.torch.empty(1, device=self.device)
            ready_steps["cuda_init"] = self.perf() - t_step
            # the C function itself: torch.cuda.synchronize is a Python
            # function the candidate could replace with one that returns
            # before the GPU is done, ending the caller's clock early
            self._sync = self.torch._C._cuda_synchronize
            self.Event = self.torch.cuda.Event
            # the commitment's own stream: the candidate may leave another
            # current (torch.cuda.set_stream), behind work of its choosing
            self.commit_stream = self.torch.cuda.Stream(device=self.device)
            _load_sibling("libcuda_path").point_triton_at_loaded_libcuda()
            warm_s = self._warm_libraries(bool(req.get("triton_driver")), warm_steps)
            t_step = self.perf()
            self.trace = _load_sibling("kernel_trace")
            if req.get("tracer", "cupti") == "cupti":
                self._bind_tracer()
            ready_steps["tracer"] = self.perf() - t_step
            if self.tracer is None:
                # torch.profiler's entry points taken now, before the
                # candidate's code can replace them in torch's modules
                from torch.profiler import ProfilerActivity, profile
                self._profile, self._profile_cuda = profile, ProfilerActivity.CUDA
            if self.sandbox.config is None or req.get("triton_driver"):
                # the mask's and the commitment's kernels chosen, checked and
                # loaded now, off the candidate's path: a spare does this
                # before its candidate exists. In Triton's default cache
                # ("init"), or in a "start" worker's own folder where nothing
                # a candidate wrote can be (a spare's fresh folder, the
                # reference's: the caller says so, as for Triton's driver),
                # their cubins and launchers planted there from the
                # reference's (triton_cache.py). Elsewhere the first use
                # does it, in verify's first batch (after the isolation
                # filter: nothing is loaded from a source's folder before
                # it), or seal's warm: 0.64 s of each "start" candidate's
                # verify on an H100 with the launchers planted, 1.44 s
                # before (docs/results.md)
                t0 = self.perf()
                try:
                    self.inputs.warm(self.device)
                except Exception:  # noqa: BLE001 - the commitment then takes torch's steps
                    pass
                warm_steps["library_kernels"] = self.perf() - t0
                warm_s += warm_steps["library_kernels"]
                if req.get("launchers"):
                    # the launchers of earlier candidates' signatures, built
                    # here by Triton's own code for the caller's memo
                    # (triton_launchers.py), off the next candidates' verify
                    t0 = self.perf()
                    try:
                        self.launchers_ready = self.launchers.build(req["launchers"])
                    except Exception:  # noqa: BLE001 - (no Triton): the candidates build their own
                        pass
                    warm_steps["launchers"] = self.perf() - t0
                    warm_s += warm_steps["launchers"]
            self._log_launchers()
        t_step = self.perf()
        self._map_shared(req.get("shared_bytes"))
        ready_steps["shared_map"] = self.perf() - t_step
        t_step = self.perf()
        launch_us = self._launch_probe()  # (a failure here is a failed ready too)
        ready_steps["launch_probe"] = self.perf() - t_step
        self.ready_failed = False
        return {"no_subreaper": NO_SUBREAPER, "launch_us": launch_us, "warm_s": warm_s,
                "warm_steps_s": warm_steps, "launchers_ready": self.launchers_ready,
                "ready_steps_s": ready_steps, "began_at": began_at, "ended_at": time.monotonic()}

    def _log_launchers(self):
        """The record of the signatures Triton makes launchers for in this
        process, from before the candidate's code (its seal reply says
        them: triton_launchers.py); none where Triton is missing."""
        try:
            log = self.launchers.LauncherLog()
            log.install()
            self.launcher_log = log
        except Exception:  # noqa: BLE001 - (no Triton) nothing to say
            pass

    def _bind_tracer(self):
        """CUPTI's functions bound now (no CUPTI call: kernel_trace.py); where
        none binds, attribution takes torch.profiler and says why."""
        try:
            self.tracer = self.trace.KernelTrace(torch_dir=os.path.dirname(self.torch.__file__))
        except Exception as e:  # noqa: BLE001 - attribution falls back, with the reason
            self.tracer, self.tracer_why = None, f"{type(e).__name__}: {e}"[:300]

    def _warm_libraries(self, triton_driver, steps_s):
        """Pays now, before any candidate code is in the process, what a
        candidate's first calls would otherwise pay inside its `verify`
        (1.8-3.7 s on the H200): cuBLAS's and cuBLASLt's handles (a matmul,
        a linear with a bias), cuDNN's libraries (a convolution) and
        Triton's import; Triton's driver (its helper module, compiled once
        into TRITON_CACHE_DIR and loaded from there) and its compiler's
        first use (_triton_first_compile) only where the caller says that
        cache holds nothing a candidate wrote: loading a module
        from a candidate's folder here would run its code before the
        isolation filter (entered at load). Nothing it does lasts but what
        any first call leaves (the libraries loaded, their handles, the
        allocator's blocks): no setting is changed, no profiler started. A
        step that fails is skipped (a candidate that needs the library pays
        as before). Seconds taken; each step's into steps_s."""
        t = self.torch
        t0 = self.perf()

        def cublas():
            a = t.ones(8, 8, device=self.device)
            (a @ a).sum()
            t.nn.functional.linear(a, a, a[0]).sum()

        def cudnn():
            if t.backends.cudnn.is_available() and t.backends.cudnn.enabled:
                t.nn.functional.conv2d(t.ones(1, 1, 8, 8, device=self.device),
                                       t.ones(1, 1, 3, 3, device=self.device)).sum()

        def triton():
            import triton
            if triton_driver:
                triton.runtime.driver.active.get_current_device()

        def triton_compiler():
            if triton_driver:
                import triton
                self._triton_first_compile(triton)

        for step in (cublas, cudnn, triton, triton_compiler):
            t1 = self.perf()
            try:
                with self.no_grad():
                    step()
                self.sync()
            except Exception:  # noqa: BLE001 - (no Triton, no cuDNN): the candidate's first call pays
                pass
            steps_s[step.__name__] = self.perf() - t1
        return self.perf() - t0

    def _triton_first_compile(self, triton):
        """Triton's first compile in a process sets up its compiler (MLIR,
        LLVM, ptxas): 0.79 s for a small kernel against 0.08 s for the next
        one (this project's CPU, Triton 3.6, `triton.compile` for sm_90).
        A spare pays it here, with a kernel of its own into the trusted
        cache, so a candidate's first launch in verify pays only its own
        kernel's compile (not yet measured on a GPU)."""
        import triton.language as tl

        @triton.jit
        def kr_warm_compile(x, n, B: tl.constexpr):
            i = tl.arange(0, B)
            tl.store(x + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)
        x = self.torch.zeros(16, device=self.device)
        kr_warm_compile[(1,)](x, 16, B=16)

    def _launch_probe(self, calls=30, ops=20, rounds=3):
        """Microseconds a small op takes to launch in this process: a fixed
        chain of tiny multiply-adds (after one unmeasured round), the median
        of `rounds`. Measured in ready, before any candidate code is in the
        process, so the candidate has no say in it. On the H200 identical
        fresh processes launched such a chain 1.44x apart (91af0ed: the
        process's luck, docs/kernelbench.md); results compare the
        candidate's worker with the baseline's (launch_luck)."""
        t = self.torch
        sync = self._sync or (lambda: None)
        x = t.zeros(256, device=self.device)

        def one_round():
            sync()
            t0 = self.perf()
            with self.no_grad():
                for _ in range(calls):
                    y = x
                    for _ in range(ops):
                        y = y * 1.0001 + 0.0001
            sync()
            return (self.perf() - t0) * 1e6 / (calls * ops * 2)

        one_round()
        return sorted(one_round() for _ in range(rounds))[rounds // 2]

    def load(self, req):
        if self.loaded:
            raise RuntimeError("this worker already loaded a candidate")
        if self.ready_failed or self.sandbox.error:
            raise RuntimeError("this worker did not start (see its ready): no source runs in it")
        self.loaded = True
        if self.device is None:
            self.ready({"device": req["device"], "library": req.get("library")})
        self.layouts = req["layouts"]
        self.init_inputs, self.values = req["init_inputs"], req["values"]
        self.state_names, self.class_name = req["state_names"], req.get("class_name", "ModelNew")
        for k, v in (req.get("env") or {}).items():
            os.environ[k] = v  # the candidate's own build and temporary folders
        import tempfile
        tempfile.tempdir = None  # TMPDIR again
        src = req["source"]
        digest = hashlib.sha256(src.encode()).hexdigest()[:24]
        # load_inline builds land in a directory named by the source's hash
        # (made by the caller, the only folder the sandbox lets this process
        # write): the same candidate again (another case, another seed) is
        # not rebuilt
        # the caller's folder for it: the source's own, or a fresh one a
        # "start" spare was started with (its name a link to it now)
        ext = req.get("ext") or os.path.join(req["cache_dir"], digest)
        # (not the Triton and inductor caches: the runner plants the
        # library's own Triton kernels before a new candidate's first run)
        cached = os.path.isdir(ext) and bool(set(os.listdir(ext)) - {"tmp", "triton", "inductor"})
        os.makedirs(ext, exist_ok=True)
        os.environ["TORCH_EXTENSIONS_DIR"] = ext
        if self.sandbox.config is None and req.get("sandbox"):
            self.sandbox = Sandbox(req["sandbox"])  # "init": known only now
        if self.sandbox.config and self.sandbox.config["when"] == "init":
            self.sandbox.enter(exec_allowed=True)
        if self.sandbox.error:
            raise RuntimeError(self.sandbox.error)
        isolation = isolate(req["library"])
        t0 = self.perf()
        mod = types.ModuleType("candidate")
        mod.__file__ = os.path.join(ext, "candidate.py")
        # the source as a file the code points at: Triton's @jit reads its
        # function's source back (inspect.getsourcelines) and refuses code
        # that has none ("@jit functions should be defined in a Python
        # file", every Triton ModelNew on the H200 at 67f5547)
        with open(mod.__file__, "w") as f:
            f.write(src)
        sys.modules["candidate"] = mod
        exec(compile(src, mod.__file__, "exec"), mod.__dict__)
        self.cls = getattr(mod, self.class_name, None)
        if self.cls is None:
            raise LookupError(f"the candidate defines no class {self.class_name}")
        return {"compile_seconds": self.perf() - t0, "cached": cached, "hash": digest,
                "sandbox": self.sandbox.report(), "isolation": isolation}

    def seal(self, req):
        """Phase two: no program can be started from here on (so what the
        commitment compiles on a GPU is compiled first: inputs.warm)."""
        try:
            self.inputs.warm(self.device)
        except Exception:  # noqa: BLE001 - the commitment then takes torch's steps (same bits)
            pass
        if self.sandbox.config:
            self.sandbox.enter(exec_allowed=False)
            if self.sandbox.error:
                raise RuntimeError(self.sandbox.error)
        return {"sandbox": self.sandbox.report(),
                "gpu_paths": self.inputs.gpu_paths() if self.device != "cpu" else {},
                "launchers": self.launcher_log.report() if self.launcher_log is not None else []}

    def build(self, req):
        case = req["case"]
        with self.torch.device(self.device):
            self.torch.manual_seed(0)  # KernelBench's convention: Model and ModelNew seeded alike
            model = self.cls(*self.init_inputs[case])
        names = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_buffers()}
        missing = [n for n in self.state_names if n not in names]
        if req.get("compile"):
            return self._build_compiled(case, model, missing)
        self.models[case] = (model, not missing)
        return {"lifted": not missing, "missing": missing[:8]}

    def _build_compiled(self, case, model, missing):
        """The torch.compile baseline (Runner(baseline="compile"), the
        trusted Model only): compiled here, on one call of the case's
        shapes, because compiling starts programs (a C++ compiler on the
        CPU, ptxas on a GPU) and the seal that follows refuses them. Timed
        with its own seeded weights (lifted false: a compiled module's
        parameters are its own; values do not change its time). The
        compile workers stay in this process (compile_threads 1): the
        isolation filter lets it signal no other process."""
        import torch._inductor.config as inductor_config
        inductor_config.compile_threads = 1
        compiled = self.torch.compile(model)
        tensors = self.make_inputs(self.layouts[case], 0, self.device)
        args, _ = self._arguments(case, tensors, False)
        t0 = self.perf()
        with self.no_grad():
            compiled(*args)
        self.sync()
        from torch._dynamo.utils import counters
        self.models[case] = (compiled, False)
        return {"lifted": False, "missing": missing[:8], "compile_seconds": self.perf() - t0,
                "graphs": int(counters["stats"]["unique_graphs"])}

    def _arguments(self, case, tensors, lifted):
        """The forward's arguments and, with lifted weights, the state (name:
        tensor; go puts them into the model's slots, attribute gives them to
        functional_call): made here, before the batch's clock starts."""
        state, args = {}, dict((int(k), v) for k, v in self.values[case].items())
        for t in self.layouts[case]:
            if t["source"] == "input":
                args[t["index"]] = tensors[t["name"]]
            elif lifted:
                state[t["module_name"]] = tensors[t["name"]]
        return tuple(args[i] for i in sorted(args)), state

    def prepare(self, req):
        """Fresh inputs for every call of the next batch. "lifted": false
        times a model with lifted weights the way a candidate whose names
        differ is timed (its own seeded weights)."""
        case = req["case"]
        model, lifted = self.models[case]
        lifted = lifted and req.get("lifted", True)
        self.batch, self.order, self.batch_model, self.slots = {}, [], model, None
        self.commit = bool(req.get("commit"))
        # "region": views of the input region, where the caller writes the
        # values masked after this reply ("seeds" are then call numbers,
        # nothing to make values from; go brings the key); else this
        # process makes them now from the seeds
        # "staged" (always on a GPU): the tensors are views of a device
        # buffer laid out like the region, which `stage` fills from it
        where, self.spans, self.staged, views = None, None, None, None
        if req.get("region"):
            if self.region is None:
                raise RuntimeError("prepare asked for the input region, and this worker has none")
            where, self.spans, size = self.inputs.region_offsets(self.layouts[case],
                                                                 len(req["seeds"]))
            if size > len(self.region):
                raise RuntimeError(f"the batch's inputs take {size} bytes, the region "
                                   f"{len(self.region)}")
            views = self.region
            if req.get("staged") or self.device != "cpu":
                self.staged = views = self.torch.empty(size, dtype=self.torch.uint8,
                                                       device=self.device)
        for i, seed in enumerate(req["seeds"]):
            tensors = (self.inputs.region_views(views, self.layouts[case], where[i]) if where
                       else self.make_inputs(self.layouts[case], seed, self.device))
            args, state = self._arguments(case, tensors, lifted)
            if state and self.slots is None:  # where go puts each call's weights
                self.slots = self.WeightSlots(model, list(state))
            self.batch[seed] = [tensors, None]
            self.order.append((seed, args, [state[n] for n in self.slots.names] if state else None))
        if self._sync:
            self.events = (self.Event(enable_timing=True), self.Event(enable_timing=True))
        self.sync()
        return {"prepared": len(self.batch)}

    def stage(self, req):
        """The caller put n bytes of the batch's masked values at offset
        "at": copied into the device buffer prepare laid out (untimed; still
        masked, go brings the key). From the region, or with "ipc" (the
        size of the caller's device buffer this worker mapped in ready:
        cuda_ipc.py) from that buffer's first n bytes, device to device."""
        if self.staged is None:
            raise RuntimeError("stage without a staged prepare")
        at, n = req.get("at"), req.get("n")
        if not (type(at) is int and type(n) is int and 0 <= at and 0 <= n <= self.staged.numel() - at):
            raise ValueError(f"stage of {n!r} bytes at {at!r}: the batch's inputs take "
                             f"{self.staged.numel()}")
        if not n:
            return {}
        if req.get("ipc") is not None:
            src = self._ipc_source(req["ipc"])
            if n > src.numel():
                raise ValueError(f"stage of {n} bytes from a shared buffer of {src.numel()}")
            self.staged[at:at + n].copy_(src[:n])
        else:
            self.staged[at:at + n].copy_(self.torch.frombuffer(self.region, dtype=self.torch.uint8,
                                                               count=n, offset=at))
        self.sync()
        return {}

    def _map_shared(self, nbytes):
        """The caller's device buffer for stage (cuda_ipc.py), mapped from
        the descriptor this worker started with, in ready: before any
        candidate code, which then finds the mapping (as it finds the
        region) but never the descriptor. A failure is kept for stage to
        say (the caller then stages through the region)."""
        fd, self.shared_fd = self.shared_fd, None
        if fd is None:
            return
        try:
            self.ipc = self.cuda_ipc.map_buffer(self.torch, self.device, fd, nbytes)
        except Exception as e:  # noqa: BLE001 - said at the first stage from it
            self.ipc_error = f"{type(e).__name__}: {e}"
        finally:
            os.close(fd)  # the import holds the memory

    def _ipc_source(self, ipc):
        """The caller's shared device buffer, mapped in ready."""
        if self.ipc is None:
            raise RuntimeError(self.ipc_error or "this worker was given no shared buffer")
        if ipc.get("bytes") != self.ipc.nbytes:
            raise ValueError(f"the shared buffer has {self.ipc.nbytes} bytes, not {ipc.get('bytes')!r}")
        return self.ipc.tensor

    def go(self, req):
        """The batch, back to back; the caller's clock runs around this
        request. Nothing but the calls, the commitment when asked for, and
        the final synchronisation before the reply (event times are asked
        for afterwards: `times`).

        The commitment (prepare's "commit"): the sums of every output of
        every call (inputs.sums), made before the reply, so inside the
        caller's clock. The caller fetches some calls later and checks that
        their bytes have the sums committed to. This process runs the
        candidate's code, which can do work after the clock stopped (a
        thread, a trace function, a patched torch or worker method that
        computes an output when the fetch reads it, GPU work the end of the
        batch did not wait for): outputs made after the reply cannot have
        been committed to, so they fail the check. The candidate can replace
        the code below too; it still cannot commit to outputs it has not
        computed."""
        model, slots, outs = self.batch_model, self.slots, []
        mask, commit = self.inputs.mask, self._commit
        put = slots.put if slots is not None else None
        # verify's batches only, when the caller asks (its KR_PROFILE): never
        # a timed one, which this would slow with its synchronisations
        profile = self.GoProfile(self) if req.get("profile") else None
        if profile is not None:
            model, mask, commit = (profile.timed(model, "forward"), profile.timed(mask, "unmask"),
                                   profile.timed(commit, "commit"))
            put = put and profile.timed(put, "weights")
            profile.start()
        key = self._mask_key(req) if self.spans else None
        collecting = gc.isenabled()
        gc.disable()  # no collection in the middle of a batch, for either side
        try:
            if self.events:
                self.events[0].record()
            t0 = self.perf()
            with self.no_grad():
                for i, (_, args, weights) in enumerate(self.order):
                    if key is not None:  # this call's values, only now (inputs.py)
                        mask(self._span(i), key, self.spans[i][0])
                    if weights is not None:
                        put(weights)
                    outs.append(model(*args))
                committed = commit(outs) if self.commit else None
            if self.events:
                self.events[1].record()
            self.sync()
            self.last_us = (self.perf() - t0) * 1e6
            if committed is not None:
                committed = self._read_back(committed)
        finally:
            if profile is not None:
                profile.stop()
            if slots is not None:
                slots.restore()  # (also where a call raised)
            if collecting:
                gc.enable()
        for (seed, _, _), out in zip(self.order, outs):
            self.batch[seed][1] = out
            for o in (out if isinstance(out, (tuple, list)) else (out,)):
                # a Tensor subclass could compute only when read (in fetch,
                # for the calls checked), leaving the batch nothing to time
                if isinstance(o, self.Tensor) and type(o) not in self.plain:
                    raise TypeError(f"forward returned a {type(o).__name__}: outputs must be "
                                    "plain torch.Tensor")
        out = {} if committed is None else {"committed": committed}
        if profile is not None:
            out["profile"] = profile.report(self.last_us / 1e6)
        return out

    def _span(self, i):
        """Call i's span of the region (or of its device copy), as bytes."""
        start, end = self.spans[i]
        if self.staged is not None:
            return self.staged[start:end]
        if end == start:  # every input of the call empty (frombuffer refuses a count of 0)
            return self.torch.empty(0, dtype=self.torch.uint8)
        return self.torch.frombuffer(self.region, dtype=self.torch.uint8, count=end - start,
                                     offset=start)

    def _mask_key(self, req):
        """go's key for the input region (base64 of KEY_BYTES), made ready
        for the device that unmasks (before the clock starts)."""
        raw = base64.b64decode(req.get("key") or "")
        if len(raw) != self.inputs.KEY_BYTES:
            raise RuntimeError("go brought no key for the input region")
        return self.inputs.Key(raw, self.staged.device if self.staged is not None else "cpu")

    def _commit(self, outs):
        """The commitment, made once every stream is quiet: the whole device
        synchronised first, so work the calls left queued on any stream
        (another stream, a delayed launch, a host function holding a stream)
        is done, inside the clock, before the sums read the outputs; the
        sums then run on the worker's own stream. Work queued after this
        point (a thread of the candidate's, a callback, a collector's hook)
        writes outputs the commitment has already summed: a checked call
        made so is wrong."""
        if self._sync is None:
            return self._commitments(outs)
        self.sync()
        with self.torch.cuda.stream(self.commit_stream):
            return self._commitments(outs)

    def _commitments(self, outs):
        """[[sums of each output] per call] (None for an output that is no
        tensor). Every output of the batch in one launch where they are
        plain tensors the table takes (inputs.sums_of_table: addresses read
        only of plain tensors, whose data_ptr a subclass cannot redefine);
        else output k of every call at once when they all have one shape,
        dtype and device (a dozen operations a batch, not ten a call); else
        call by call."""
        calls = [out if isinstance(out, (tuple, list)) else (out,) for out in outs]
        T = self.Tensor
        flat = [o for c in calls for o in c if isinstance(o, T)]
        if flat and all(type(o) in self.plain for o in flat):
            table = self.sums_of_table(flat)
            if table is not None:
                rows = iter(table)
                return [[next(rows) if isinstance(o, T) else None for o in c] for c in calls]
        width = len(calls[0]) if calls else 0
        columns = [[c[k] for c in calls] for k in range(width)] if all(
            len(c) == width for c in calls) else None

        def alike(col):
            x0 = col[0]
            return isinstance(x0, T) and all(
                isinstance(x, T) and x.shape == x0.shape and x.dtype == x0.dtype and
                x.device == x0.device for x in col)

        if columns is None or not all(alike(col) for col in columns):
            return [[self.sums(o) if isinstance(o, T) else None for o in c] for c in calls]
        per_column = [self.sums_of_many(col) for col in columns]
        return [[per_column[k][i] for k in range(width)] for i in range(len(calls))]

    def _read_back(self, committed):
        """The commitment's sums as Python ints: one copy from the device
        for the whole batch (one a sum would be a synchronisation each,
        inside the clock), per sum where they sit on different devices."""
        flat = [s for c in committed for s in c if s is not None]
        try:
            values = iter(self.torch.stack(flat).tolist() if flat else [])
        except RuntimeError:  # outputs on several devices
            values = iter([s.tolist() for s in flat])
        return [[next(values) if s is not None else None for s in c] for c in committed]

    def times(self, req):
        """The last batch's own time (CUDA events around it, or this
        process's clock on the CPU), in microseconds."""
        if self.events:
            return {"event_us": self.events[0].elapsed_time(self.events[1]) * 1e3}
        return {"event_us": self.last_us}

    def fetch(self, req):
        """A call's outputs: their descriptions, and their bytes as the
        payload; with "ipc" (the shared buffer's size, as for stage) no
        payload: the outputs stay on the device, fetch_piece copies them
        to the caller piece by piece through the shared buffer."""
        inputs, out = self.batch[req["seed"]]
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        ipc = req.get("ipc")
        if ipc is not None:
            self._ipc_source(ipc)  # mapped, of the caller's size: else the caller uses the pipe
        meta, blobs, self.held, self.fetched = [], [], [], []
        for o in outs:
            if not isinstance(o, self.Tensor):
                meta.append({"type": type(o).__name__})
                self.fetched.append(None)  # (fetch_piece's output k is the k-th of outputs)
                continue
            t = o.detach()
            t = (t.to(self.device) if ipc is not None else t.to("cpu")).contiguous()
            n = t.numel() * t.element_size()
            meta.append({"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                         "nbytes": n})
            if ipc is not None:
                self.fetched.append(t.reshape(-1).view(self.torch.uint8) if n else t)
                continue
            self.held.append(t)  # the buffer below is its memory: kept until written
            if n:
                blobs.append(memoryview((ctypes.c_char * n).from_address(t.data_ptr())).cast("B"))
        res = {"outputs": meta, "input_digest": self.digest(list(inputs.values()))}
        if ipc is not None:
            res["ipc_bytes"] = sum(m.get("nbytes", 0) for m in meta)
        return res, blobs

    def fetch_piece(self, req):
        """n bytes of the last ipc fetch's output k from byte "at" on,
        copied into the shared buffer's first n bytes (the caller copies
        them out before it asks for the next piece)."""
        k, at, n = req.get("output"), req.get("at"), req.get("n")
        if not (type(k) is int and 0 <= k < len(self.fetched) and self.fetched[k] is not None):
            raise ValueError(f"fetch_piece of output {k!r}: not a tensor of the last fetch's "
                             f"{len(self.fetched)} outputs")
        src = self.fetched[k]
        dst = self._ipc_source(req.get("ipc") or {})
        if not (type(at) is int and type(n) is int and 0 <= at and 0 < n <= min(src.numel() - at, dst.numel())):
            raise ValueError(f"fetch_piece of {n!r} bytes at {at!r} of an output of {src.numel()} "
                             f"through a buffer of {dst.numel()}")
        dst[:n].copy_(src[at:at + n])
        self.sync()
        return {}

    def attribute(self, req):
        """One call traced: the kernels, memcpys and memsets it ran, with
        their GPU time, and which tracer saw them ("cupti": kernel_trace.py,
        bound at ready, with the GPU's busy time; "torch.profiler": a kineto
        session, asked for or where CUPTI could not be bound at ready,
        tracer_why saying why). The way is chosen at ready, never by what
        happens here: a trace that fails is an attribution that failed (the
        candidate's code runs here, and could otherwise pick the tracer)."""
        case = req["case"]
        model, lifted = self.models[case]
        tensors = self.make_inputs(self.layouts[case], req["seed"], self.device)
        args, state = self._arguments(case, tensors, lifted)

        def call():
            with self.no_grad():
                self.functional_call(model, state, args) if state else model(*args)
            self.sync()
        if self.tracer is not None:
            kernels = self.tracer.run(call)
            return {"kernels": kernels, "tracer": "cupti", "busy_us": self.tracer.busy_us}
        with self._profile(activities=[self._profile_cuda]) as prof:
            call()
        cuda = self.torch.autograd.DeviceType.CUDA
        kernels = self.trace.by_name(
            (e.name, e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
            for e in prof.events() if e.device_type == cuda)
        return {"kernels": kernels, "tracer": "torch.profiler", "tracer_why": self.tracer_why}

    def drop(self, req):
        self.batch, self.order, self.events, self.staged, self.fetched = {}, [], None, None, []
        return {}

    def launch(self, req):
        """The launch probe again, at a quiet moment: asked of the
        reference's worker only (a candidate's answer would be its own)."""
        return {"launch_us": self._launch_probe()}

    def serve(self, inp):
        for line in inp:
            req = json.loads(line)
            op = req["op"]
            try:
                if op not in OPS:
                    raise ValueError(f"no such request: {op}")
                res = getattr(self, op)(req)
                payload = ()
                if isinstance(res, tuple):
                    res, payload = res
                self.reply({"ok": True, **res}, payload)
                self.held = []
            except Exception as e:
                self.reply({"ok": False, "error": f"{type(e).__name__}: {e}",
                            "denied": self.sandbox.status is not None and _denied(e),
                            "sandbox_failed": bool(self.sandbox.error),
                            "trace": traceback.format_exc()[-2000:]})


OPS = ("ready", "load", "seal", "build", "prepare", "stage", "go", "times", "fetch", "fetch_piece",
       "attribute", "drop", "launch")


def run_worker(rfd, wfd, config, region_fd=None, shared_fd=None):
    out = os.fdopen(wfd, "wb")
    inp = os.fdopen(rfd, "rb")
    region = None
    # mapped now and its descriptor closed: nothing started inherits it (the
    # copy Python's mmap keeps is close-on-exec; the caller sealed the memfd
    # at its size, so that copy cannot shrink it under the caller's mapping)
    if region_fd is not None:
        region = mmap.mmap(region_fd, 0)
        os.close(region_fd)
    if shared_fd is not None:  # held until ready maps it: nothing started inherits it
        os.set_inheritable(shared_fd, False)
    sandbox = Sandbox(config if config and config.get("when") == "start" else None)
    if sandbox.config:
        sandbox.enter(exec_allowed=True)  # before torch: one thread, the only one
    Worker(out, sandbox, region, shared_fd).serve(inp)


# --------------------------------------------------------------- supervisor
# why the supervisor is no subreaper (None: it is); the forked worker reads
# its copy and says it in its `ready` reply
NO_SUBREAPER = None


def supervise(rfd, wfd, config, region_fd=None, shared_fd=None):
    global NO_SUBREAPER
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    except OSError as e:  # a kernel without it: orphans go to init, out of reach
        NO_SUBREAPER = str(e)
    me = os.getpid()
    supervision = _load_sibling("supervisor")  # before the fork: a load that fails fails the start
    pid = os.fork()
    if pid == 0:
        _worker_child(me, rfd, wfd, config, region_fd, shared_fd)
    os.close(rfd)  # only the worker holds the protocol's pipes: its death is their EOF
    os.close(wfd)
    for fd in (region_fd, shared_fd):  # the worker's, not the supervisor's
        if fd is not None:
            os.close(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    supervision.Supervisor(pid).serve(0, 1)


def _worker_child(supervisor, rfd, wfd, config, region_fd=None, shared_fd=None):
    def body():
        os.setsid()  # its own session: nothing it does reaches the supervisor's group
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor killed: so is the worker
        if os.getppid() != supervisor:
            os._exit(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # the supervisor's control pipes stay out of the worker
        os.close(null)
        os.dup2(2, 1)  # the candidate's prints go to stderr, never into a protocol
        run_worker(rfd, wfd, config, region_fd, shared_fd)
    exit_after(body)


def exit_after(body):
    """A forked child's whole life: body(), then the process ends with its
    exit code (0, SystemExit's, or 1 after an exception, its trace on
    stderr), never returning into the code that forked it."""
    code = 1
    try:
        body()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def main():
    rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
    config = json.loads(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
    region_fd = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else None
    shared_fd = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else None
    supervise(rfd, wfd, config, region_fd, shared_fd)


if __name__ == "__main__":
    main()
