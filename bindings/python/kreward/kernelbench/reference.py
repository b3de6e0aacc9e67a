"""The reference of an imported problem: the file's `Model`, run in this
(the caller's, trusted) process on given inputs, with the lifted parameters
and buffers put back into the module (torch.func.functional_call). Used as
the library problem's golden callback and by the ModelNew runner for the
calls it checks."""
import ctypes
import types

import torch

from .inputs import DTYPES


class Reference:
    def __init__(self, imported, device="cuda", dtype=None):
        """dtype: the module's floating-point parameters and buffers cast to
        it (torch.float64: the reference against itself at higher precision,
        kreward.vet's tolerance headroom); the caller casts the inputs."""
        self.imp, self.device, self.dtype = imported, device, dtype
        self._models = {}
        with open(imported.path, "rb") as f:  # bytes: a BOM or a coding line, as importing does
            self._code = compile(f.read(), imported.path, "exec")

    def module(self, case):
        mod = types.ModuleType("kernelbench_reference")
        mod.__file__ = self.imp.path
        exec(self._code, mod.__dict__)
        mod.__dict__.update(self.imp.cases[case][1])
        return mod

    def model(self, case):
        if case not in self._models:
            mod = self.module(case)
            with torch.device(self.device):
                torch.manual_seed(0)
                model = mod.Model(*mod.get_init_inputs())
            self._models[case] = model.to(self.dtype) if self.dtype else model
        return self._models[case]

    def __call__(self, case, tensors, lifted=True):
        """tensors: {name: tensor} of every input of the case (library
        names); returns the outputs in problem order. lifted=False: the
        module's own seeded weights (KernelBench's way), not the tensors'."""
        model = self.model(case)
        state, args = {}, {}
        for t in self.imp.tensors:
            if t["source"] in ("param", "buffer") and lifted:
                # a clone: training-mode BatchNorm writes its running stats
                state[t["module_name"]] = tensors[t["name"]].clone()
            elif t["source"] == "input":
                args[t["index"]] = tensors[t["name"]]
        args.update(self.imp.case_values(case))
        with torch.no_grad():
            out = torch.func.functional_call(model, state, tuple(args[i] for i in sorted(args)))
        return list(out) if isinstance(out, (tuple, list)) else [out]


def set_golden(problem, imported, device):
    """Makes Model the library problem's golden reference."""
    ref = Reference(imported, device)
    tensors = imported.tensors

    def callback(req):
        inputs = {}
        for t in tensors:
            if t["role"] == "in":
                shape = problem.shape([x["name"] for x in tensors].index(t["name"]), req.case)
                raw = torch.frombuffer(bytearray(req.inputs[t["name"]]), dtype=torch.uint8)
                inputs[t["name"]] = raw.view(DTYPES[t["dtype"]]).reshape(shape).to(device)
        outs = ref(req.case, inputs)
        names = [t for t in tensors if t["role"] == "out"]
        if len(outs) != len(names):
            raise ValueError(f"Model returned {len(outs)} outputs, the import saw {len(names)}")
        for t, value in zip(names, outs):
            host = value.detach().to("cpu", DTYPES[t["dtype"]]).contiguous()
            dst = req.outputs[t["name"]]
            n = host.numel() * host.element_size()
            if n != len(dst):
                raise ValueError(f"output '{t['name']}' has {n} bytes, the problem wants {len(dst)}")
            ctypes.memmove((ctypes.c_char * n).from_buffer(dst), host.data_ptr(), n)

    problem.set_golden(callback)
    return ref
