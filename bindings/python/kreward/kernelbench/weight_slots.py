"""A timed call's fresh weights put where the model's forward reads them.

A model whose parameters and buffers are the problem's inputs too (a
lifted model: worker.py `build`) gets fresh values for them every call.
torch.func.functional_call did that per call: it walks the module tree,
re-parametrises and restores each time, tens of microseconds of host time
inside both sides' clocks, which on a launch-bound model set the time the
speedup read (bench/kb_timing_probe.py). Here the slots (the module dicts
that hold each named tensor, every tied alias included, as functional_call
ties them) are found once per batch, before the clock, and a call only
assigns into them; the model's own tensors go back after the batch, also
when a call raised.

Imports nothing (the worker loads this file by path)."""


class WeightSlots:
    """Every (module dict, key) that holds the tensor each of `names` names
    in `model` (parameters and buffers, aliases included)."""

    def __init__(self, model, names):
        holders = {}
        for _, module in model.named_modules(remove_duplicate=False):
            for table in (module._parameters, module._buffers):
                for key, tensor in table.items():
                    if tensor is not None:
                        holders.setdefault(id(tensor), []).append((table, key))
        self.names, self.slots = list(names), []
        for name in self.names:
            path, _, key = name.rpartition(".")
            module = model.get_submodule(path) if path else model
            tensor = module._parameters.get(key)
            if tensor is None:
                tensor = module._buffers.get(key)
            if tensor is None:
                raise LookupError(f"the model has no parameter or buffer {name!r}")
            self.slots.append(holders[id(tensor)])
        self.originals = [[(table, key, table[key]) for table, key in slots] for slots in self.slots]

    def put(self, tensors):
        """tensors: one per name, in `names`' order."""
        for slots, tensor in zip(self.slots, tensors):
            for table, key in slots:
                table[key] = tensor

    def restore(self):
        for held in self.originals:
            for table, key, tensor in held:
                table[key] = tensor
