"""Fresh inputs for one call of an imported problem, made from a seed with
torch's generator: the ModelNew worker and the caller (which computes the
golden outputs) make the same bits from the same seed on the same device,
so inputs never travel between them. Structured inputs get their transform
here (a symmetric matrix, a triangular one, rows summing to one).

Imports only torch: the worker loads this file by path, without kreward."""
import ctypes
import hashlib

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
          "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64,
          "bool": torch.bool}

TRANSFORMS = {
    "symmetric": lambda x: (x + x.mT) / 2,
    "lower_triangular": torch.tril,
    "upper_triangular": torch.triu,
    "softmax_last": lambda x: x.float().softmax(-1).to(x.dtype),
}


def generate(shape, dtype, init, gen, device):
    dt = DTYPES[dtype]
    dist = init.get("dist", "normal")
    if dist == "int":
        return torch.randint(int(init["low"]), int(init["high"]) + 1, shape, generator=gen,
                             device=device).to(dt)
    if dist == "bernoulli":
        return (torch.rand(shape, generator=gen, device=device) < init.get("p", 0.5)).to(dt)
    if dist == "uniform":
        lo, hi = init.get("low", -1.0), init.get("high", 1.0)
        x = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (hi - lo) + lo
        return x.to(dt)
    x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    return (x * init.get("std", 1.0) + init.get("mean", 0.0)).to(dt)


def make_inputs(layout, seed, device):
    """layout: [{name, shape, dtype, init, transform}] of the input tensors
    of one case; returns {name: tensor}."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out = {}
    for t in layout:
        x = generate(t["shape"], t["dtype"], t["init"], gen, device)
        if t.get("transform"):
            x = TRANSFORMS[t["transform"]](x)
        out[t["name"]] = x.contiguous()
    return out


def digest(tensors):
    """A content hash of tensors (bytes, shape and dtype), to see that a
    candidate left its inputs as they were."""
    h = hashlib.blake2b(digest_size=16)
    for x in tensors:
        host = x.detach().to("cpu").contiguous()
        h.update(repr((tuple(host.shape), str(host.dtype))).encode())
        h.update(ctypes.string_at(host.data_ptr(), host.numel() * host.element_size()))
    return h.hexdigest()
