"""The input region's mask (inputs.py): ChaCha8's keystream XORed over the
region's bytes, a fresh 256-bit key per batch. Byte o of the region takes
byte o of the stream (block o // 64, libkreward's kr_keystream_xor layout),
so the worker unmasks one call's span at a time, in place, inside the
clock, and every byte of a batch has keystream of its own.

Why a stream cipher: the region's first mask was 32 KB of random words
repeated over the data. Wherever a value was known (the zero padding between
tensors, the zeros of a triangular input, the high bits of small integers)
the masked word gave the key word away, and with it that word's every other
use: a candidate read the whole key in an untimed request and computed the
batch before the clock (helper-26's review: 21x on a triangular matmul,
14x on cross-entropy). Known bytes of ChaCha's stream tell nothing of its
other bytes. Eight rounds: the mask is undone inside both clocks, and
ChaCha8 keeps a wide margin against every published attack (the best
reach seven rounds, far beyond any compute a candidate has).

Three implementations, one stream:
- host memory: libkreward's kr_keystream_xor through ctypes (use_library
  names the file; the worker loads it by path, without kreward);
- a GPU: one pass of a Triton kernel (keystream_triton.py) where Triton
  imports and the kernel's bits match torch's steps on the device at first
  use (the tiled kernel, else the strided one), else torch's steps;
  `gpu_path()` says which;
- torch's steps (_torch_xor), on any device: the fallback and the tests'
  second opinion.

Imports only torch (and ctypes)."""
import ctypes
import os

import torch

KEY_BYTES = 32
ROUNDS = 8
BLOCK_BYTES = 64

_LIB = {"path": None, "fn": None}
# kernel: None: not tried; False: unavailable; else the chosen kernel.
# path: what masks device memory, for reports; why: the reason for a fallback
_TRITON = {"kernel": None, "path": None, "why": None}


def use_library(path):
    """The libkreward file whose kr_keystream_xor masks host memory, loaded
    now: a worker calls this before its sandbox, which may not let it open
    the file later. A failure is kept and raised where host memory is
    masked (a GPU worker never does)."""
    if not path or path == _LIB["path"]:
        return
    _LIB["path"] = path
    try:
        fn = ctypes.CDLL(path).kr_keystream_xor
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_uint64,
                       ctypes.c_int]
        fn.restype = ctypes.c_int
        _LIB["fn"] = fn
    except (OSError, AttributeError) as e:
        _LIB["fn"] = f"{path}: {e}"


def _host_fn():
    fn = _LIB["fn"]
    if fn is None or isinstance(fn, str):
        raise RuntimeError("no libkreward for the input region's mask: " +
                           (fn or "keystream.use_library was not called"))
    return fn


class Key:
    """A batch's key: its 32 bytes, and its eight words on the device that
    unmasks (made once, before the clock)."""

    def __init__(self, raw, device="cpu"):
        if len(raw) != KEY_BYTES:
            raise ValueError(f"a key has {KEY_BYTES} bytes, not {len(raw)}")
        self.raw = bytes(raw)
        self.words = [int.from_bytes(self.raw[4 * i:4 * i + 4], "little") for i in range(8)]
        self.on_device = self.words_on(device) if torch.device(device).type != "cpu" else None

    def words_on(self, device):
        """The eight words as an int32 tensor on device (what the kernels take)."""
        signed = [w - (1 << 32) if w >= 1 << 31 else w for w in self.words]
        return torch.tensor(signed, dtype=torch.int32, device=device)


def new_key(device="cpu"):
    return Key(os.urandom(KEY_BYTES), device)


def xor_(buf, key, first_block):
    """XORs buf (a contiguous uint8 tensor) in place with the stream of key
    from block first_block; returns buf. On a GPU buf's length must be a
    whole number of blocks (the region's spans are)."""
    n = buf.numel()
    if not n:
        return buf
    if not buf.is_contiguous() or buf.dtype != torch.uint8:
        raise ValueError("the mask takes a contiguous uint8 tensor")
    if buf.device.type == "cpu":
        _host_xor(buf.data_ptr(), n, key.raw, first_block)
        return buf
    if n % BLOCK_BYTES:
        raise ValueError(f"a device span of {n} bytes is not a whole number of "
                         f"{BLOCK_BYTES}-byte blocks")
    words = buf.view(torch.int32)
    if _triton_ready(words.device):
        try:
            _TRITON["kernel"](words, key.on_device, first_block, ROUNDS)
            return buf
        except Exception as e:  # noqa: BLE001 - any failure: torch's steps, from now on
            _fall_back(f"the Triton kernel failed: {type(e).__name__}: {e}")
    _torch_xor(words, key.words, first_block, ROUNDS)
    return buf


# Host memory is unmasked on every thread torch computes with: the worker's
# code is the candidate's to replace, and a candidate that split the stream
# over the cores (it can be undone from any block) would beat a one-thread
# unmasking the baseline pays, by the number of cores.
_PARALLEL_BYTES = 1 << 20  # below this one call (a thread's start costs more)
_POOL = {"threads": 0, "pool": None}


def _host_xor(ptr, n, raw, first_block):
    fn = _host_fn()
    threads = max(1, torch.get_num_threads())
    if n < _PARALLEL_BYTES or threads == 1:
        pieces = [(0, n)]
    else:
        per = -(-n // threads // BLOCK_BYTES) * BLOCK_BYTES  # whole blocks a thread
        pieces = [(at, min(per, n - at)) for at in range(0, n, per)]

    def run(piece):
        at, size = piece
        return fn(ptr + at, size, raw, first_block + at // BLOCK_BYTES, ROUNDS)

    if len(pieces) == 1:
        codes = [run(pieces[0])]
    else:
        if _POOL["threads"] != threads:  # torch's thread count changed: a pool to match
            from concurrent.futures import ThreadPoolExecutor
            if _POOL["pool"] is not None:
                _POOL["pool"].shutdown(wait=False)
            _POOL["pool"], _POOL["threads"] = ThreadPoolExecutor(threads), threads
        codes = list(_POOL["pool"].map(run, pieces))  # ctypes lets go of the GIL
    if any(codes):
        raise RuntimeError(f"kr_keystream_xor failed ({codes})")


_M = 0xFFFFFFFF
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)


def _rotl(v, r):
    return ((v << r) | (v >> (32 - r))) & _M


def _qr(x, a, b, c, d):
    x[a] = (x[a] + x[b]) & _M
    x[d] = _rotl(x[d] ^ x[a], 16)
    x[c] = (x[c] + x[d]) & _M
    x[b] = _rotl(x[b] ^ x[c], 12)
    x[a] = (x[a] + x[b]) & _M
    x[d] = _rotl(x[d] ^ x[a], 8)
    x[c] = (x[c] + x[d]) & _M
    x[b] = _rotl(x[b] ^ x[c], 7)


def keystream_words(key_words, first_block, blocks, rounds=ROUNDS, device="cpu"):
    """The stream as int32 words [blocks * 16], in torch's steps (int64
    arithmetic kept to 32 bits)."""
    b = torch.arange(first_block, first_block + blocks, dtype=torch.int64, device=device)
    s = [torch.full_like(b, c) for c in _SIGMA] + [torch.full_like(b, w) for w in key_words]
    s += [b & _M, b >> 32, torch.zeros_like(b), torch.zeros_like(b)]
    x = list(s)
    for _ in range(rounds // 2):
        _qr(x, 0, 4, 8, 12)
        _qr(x, 1, 5, 9, 13)
        _qr(x, 2, 6, 10, 14)
        _qr(x, 3, 7, 11, 15)
        _qr(x, 0, 5, 10, 15)
        _qr(x, 1, 6, 11, 12)
        _qr(x, 2, 7, 8, 13)
        _qr(x, 3, 4, 9, 14)
    out = torch.stack([(xi + si) & _M for xi, si in zip(x, s)], dim=1).reshape(-1)
    return torch.where(out >= 1 << 31, out - (1 << 32), out).to(torch.int32)


def _torch_xor(words, key_words, first_block, rounds):
    """xor_ in torch's steps, a few thousand blocks at a time (its int64
    temporaries are ~34 times the data)."""
    per = 1 << 14
    blocks = words.numel() // 16
    for at in range(0, blocks, per):
        n = min(per, blocks - at)
        words[at * 16:(at + n) * 16].bitwise_xor_(
            keystream_words(key_words, first_block + at, n, rounds, words.device))


def _fall_back(why):
    _TRITON.update(kernel=False, path="torch steps", why=why[:300])


def _triton_ready(device):
    """The Triton kernel for device memory, chosen at first use: the first
    of keystream_triton.CHOICES whose bits on this device match torch's
    steps (700 blocks, a ragged program and the counter's wrap). A layout
    the compiler gets wrong on some GPU or Triton release then costs speed,
    not a wrong mask (an honest candidate would read garbage and fail)."""
    if _TRITON["kernel"] is None:
        try:
            import importlib.util
            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keystream_triton.py")
            spec = importlib.util.spec_from_file_location("kreward_keystream_triton", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except Exception as e:  # noqa: BLE001 - no Triton, or one that cannot build this
            _fall_back(f"no Triton kernel: {type(e).__name__}: {e}")
            return False
        _choose(mod, device)
    return bool(_TRITON["kernel"])


def _choose(mod, device):
    """Sets _TRITON to the first of mod.CHOICES (run by mod.chacha_xor)
    that gives torch's steps' bits on device, or to torch's steps, with why.
    Each is checked twice: across the counter's wrap (a first block past
    2^31, which Triton passes as int64) and from a small first block (int32,
    the variant real spans run): two compiled variants of one kernel."""
    try:
        key = new_key()
        on_device = key.words_on(device)
        spans = [((1 << 32) - 300, 700), (5, 333)]
        wants = [keystream_words(key.words, first, blocks, ROUNDS, device) for first, blocks in spans]
    except Exception as e:  # noqa: BLE001 - the device cannot even run the check
        _fall_back(f"the check could not run on {device}: {type(e).__name__}: {str(e)[:120]}")
        return
    why = []
    for choice, (kernel, block, warps) in enumerate(mod.CHOICES):
        name = getattr(kernel, "__name__", str(kernel))
        try:
            right = True
            for (first, blocks), want in zip(spans, wants):
                words = torch.zeros(blocks * 16, dtype=torch.int32, device=device)
                mod.chacha_xor(words, on_device, first, ROUNDS, choice)
                right = right and bool(torch.equal(words, want))
        except Exception as e:  # noqa: BLE001 - this one cannot build or run here
            why.append(f"{name}: {type(e).__name__}: {str(e)[:120]}")
            continue
        if right:
            jit = lambda w, k, f, r, c=choice: mod.chacha_xor(w, k, f, r, c)  # noqa: E731
            launch, how = _direct(mod, choice, device, on_device, spans[1], wants[1])
            _TRITON.update(kernel=launch or jit,
                           path=f"triton choice {choice}: {name} ({block} blocks, {warps} warps, {how})",
                           why="; ".join(why)[:300] or None)
            return
        why.append(f"{name}: wrong bits on {device}")
    _fall_back("; ".join(why) or "no kernel")


def _direct(mod, choice, device, on_device, span, want):
    """(a launcher of the chosen kernel that skips Triton's JIT launch, or
    None; what launches it, for gpu_path): keystream_triton.direct_launch,
    used only where its bits on this device are the JIT launch's (the span
    the int32 variant runs). Either launch gives the same stream; the
    direct one costs the clocks less host time a call."""
    direct = getattr(mod, "direct_launch", None)
    if direct is None:
        return None, "Triton's launch"
    try:
        launch = direct(choice, device, ROUNDS)
        first, blocks = span
        words = torch.zeros(blocks * 16, dtype=torch.int32, device=device)
        launch(words, on_device, first)
        if not bool(torch.equal(words, want)):
            return None, "Triton's launch: the direct launch gave other bits"
    except Exception as e:  # noqa: BLE001 - Triton's own launch serves
        return None, f"Triton's launch: no direct one ({type(e).__name__}: {str(e)[:100]})"
    return (lambda w, k, f, r: launch(w, k, f) if r == ROUNDS else
            mod.chacha_xor(w, k, f, r, choice)), "direct launch"


def gpu_path():
    """What masks device memory in this process ("triton choice N: <kernel>
    (...)", N its place in keystream_triton.CHOICES, best first; or "torch
    steps"), and why it fell back, if it did; None before first use (warm
    makes it)."""
    return {"path": _TRITON["path"], "why": _TRITON["why"]}


def warm(device):
    """Compiles the GPU's kernel now (a worker calls it before its seal
    refuses new programs)."""
    if torch.device(device).type != "cpu":
        xor_(torch.zeros(BLOCK_BYTES * 3, dtype=torch.uint8, device=device), new_key(device), 5)
