"""A device buffer shared between the caller and one worker, for a timed
batch's masked inputs (transfer.py put): the caller copies a masked chunk
into it a piece at a time, the worker copies each piece into its own staged
buffer, device to device. The host region (inputs.py) costs two trips over
PCIe per byte, 0.2 s/GiB each with pageable memory; this costs none
(bench/bench_staging.py on the H200 at 16b7c39: 0.001 s/GiB; a timed phase
6.0 -> 1.7 s on a 64 MB-a-call problem at 00f00f2).

Shared by a file descriptor, not a CUDA IPC handle: a legacy handle
(cuIpcGetMemHandle) is 64 bytes any process of the user on the machine may
open, and what is in it is the driver's, not a secret; a candidate running
in another Runner's worker could map the buffer and spoil the inputs of an
honest candidate (or of the baseline) while they are staged. The buffer is
a cuMemCreate allocation exported as a POSIX descriptor
(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) for one worker, given at its
start (pass_fds, as the host region's memfd) and mapped in its ready; the
caller keeps no descriptor, and the sandbox refuses pidfd_getfd, ptrace
and the sockets to pass one on. The allocation is this buffer alone (not
torch's caching allocator, whose segments hold the caller's other
tensors), and only masked bytes are ever copied into it (the key comes
with go): the worker may read it at any time.

HostBuffer/HostMapping: the same in host memory, for a Runner on the CPU
told to stage as a GPU's does (tests of the protocol without a GPU).

Loaded by path inside the worker (worker.py _load_sibling), so it imports
nothing of the package; the driver through ctypes, torch for the views."""
import ctypes
import fcntl
import mmap
import os
import threading

_PINNED = 1              # CU_MEM_ALLOCATION_TYPE_PINNED
_POSIX_FD = 1            # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_ON_DEVICE = 1           # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3          # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_MINIMUM = 0             # CU_MEM_ALLOC_GRANULARITY_MINIMUM


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp (cuda.h, CUDA 12 and 13)
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class IpcError(RuntimeError):
    """The driver refused a step (its message says which and why; code:
    the CUresult)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY: passing, unlike a driver without the calls


_cu = []
_u64, _size = ctypes.c_uint64, ctypes.c_size_t


def _driver():
    if not _cu:
        cu = ctypes.CDLL("libcuda.so.1")
        P = ctypes.POINTER
        for name, args in (
                ("cuCtxGetDevice", [P(ctypes.c_int)]),
                ("cuMemGetAllocationGranularity", [P(_size), P(_Prop), ctypes.c_int]),
                ("cuMemCreate", [P(_u64), _size, P(_Prop), _u64]),
                ("cuMemRelease", [_u64]),
                ("cuMemAddressReserve", [P(_u64), _size, _size, _u64, _u64]),
                ("cuMemAddressFree", [_u64, _size]),
                ("cuMemMap", [_u64, _size, _size, _u64, _u64]),
                ("cuMemUnmap", [_u64, _size]),
                ("cuMemSetAccess", [_u64, _size, P(_Access), _size]),
                ("cuMemExportToShareableHandle", [ctypes.c_void_p, _u64, ctypes.c_int, _u64]),
                ("cuMemImportFromShareableHandle", [P(_u64), ctypes.c_void_p, ctypes.c_int]),
                ("cuGetErrorString", [ctypes.c_int, P(ctypes.c_char_p)])):
            f = getattr(cu, name)
            f.argtypes, f.restype = args, ctypes.c_int
        _cu.append(cu)
    return _cu[0]


def _check(rc, what):
    if rc:
        msg = ctypes.c_char_p()
        _driver().cuGetErrorString(rc, ctypes.byref(msg))
        raise IpcError(f"{what}: CUDA error {rc} ({(msg.value or b'?').decode()})", rc)


class _View:
    """A flat uint8 device array at a raw address, for torch.as_tensor."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}


def _tensor(torch, ptr, nbytes):
    """The bytes at ptr as a uint8 tensor on their own device (torch finds
    it from the pointer), the memory itself: never a copy, which would
    leave the other side reading or writing bytes nobody sees."""
    t = torch.as_tensor(_View(ptr, nbytes))
    if t.data_ptr() != ptr or not t.is_cuda:
        raise IpcError("torch made a copy of the shared buffer instead of a view")
    return t


class _Mapped:
    """An allocation (its generic handle) mapped read-write for this
    process's device at an address of its own; `tensor` views it. Inside
    `with torch.cuda.device(device)` every driver call acts in torch's
    context of that device (the current one), and the caller's own current
    device is back as it was when the with ends (a trainer's thread)."""

    def __init__(self, torch, device, make):
        """make(ordinal): (generic handle, bytes) of the allocation."""
        self.torch, self.device = torch, torch.device(device)
        self.handle = self.ptr = None
        self.nbytes = 0
        # held by whoever writes `tensor` (transfer.py put: a copy and its
        # stream's wait) and by close: a Runner closed from another thread
        # never unmaps memory a copy of the trainer's is writing
        self.lock = threading.Lock()
        with torch.cuda.device(self.device):
            torch.cuda.synchronize(self.device)
            try:
                ordinal = ctypes.c_int()
                _check(_driver().cuCtxGetDevice(ctypes.byref(ordinal)), "cuCtxGetDevice")
                self.handle, self.nbytes = make(ordinal.value)
                ptr = _u64()
                _check(_driver().cuMemAddressReserve(ctypes.byref(ptr), self.nbytes, 0, 0, 0),
                       "cuMemAddressReserve")
                self.ptr = ptr.value
                _check(_driver().cuMemMap(self.ptr, self.nbytes, 0, self.handle, 0), "cuMemMap")
                self.mapped = True
                access = _Access(_Location(_ON_DEVICE, ordinal.value), _READ_WRITE)
                _check(_driver().cuMemSetAccess(self.ptr, self.nbytes, ctypes.byref(access), 1),
                       "cuMemSetAccess")
                self.tensor = _tensor(torch, self.ptr, self.nbytes)
            except BaseException:
                self._free()
                raise

    def _free(self):
        cu = _driver()
        self.tensor = None
        if getattr(self, "mapped", False):
            cu.cuMemUnmap(self.ptr, self.nbytes)
            self.mapped = False
        if self.ptr is not None:
            cu.cuMemAddressFree(self.ptr, self.nbytes)
            self.ptr = None
        if self.handle is not None:
            cu.cuMemRelease(self.handle)
            self.handle = None

    def close(self):
        with self.lock:
            if self.handle is None and self.ptr is None:
                return
            with self.torch.cuda.device(self.device):
                self.torch.cuda.synchronize(self.device)  # no copy still reads it
                self._free()


class CallerBuffer(_Mapped):
    """The caller's side: at least nbytes of device memory on `device` (a
    torch device), `tensor` (uint8: masked bytes are copied in), and
    export(): a descriptor of it for one worker's start, which the caller
    closes once the worker has it (this side keeps none: a process the
    trainer forks would inherit it and hold the memory). close() frees
    this side's mapping; the worker's import holds the memory until it
    ends."""

    def __init__(self, torch, device, nbytes):
        def make(ordinal):
            prop = _Prop(_PINNED, _POSIX_FD, _Location(_ON_DEVICE, ordinal))
            gran = _size()
            _check(_driver().cuMemGetAllocationGranularity(
                ctypes.byref(gran), ctypes.byref(prop), _MINIMUM), "cuMemGetAllocationGranularity")
            size = -(-nbytes // gran.value) * gran.value
            handle = _u64()
            _check(_driver().cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0),
                   "cuMemCreate")
            return handle.value, size

        super().__init__(torch, device, make)

    def export(self):
        """A new descriptor of the allocation, not inheritable (a worker's
        start passes it on purpose: pass_fds)."""
        fd = ctypes.c_int(-1)
        with self.torch.cuda.device(self.device):
            _check(_driver().cuMemExportToShareableHandle(ctypes.byref(fd), self.handle, _POSIX_FD, 0),
                   "cuMemExportToShareableHandle")
        try:
            os.set_inheritable(fd.value, False)
        except OSError:
            os.close(fd.value)
            raise
        return fd.value


class WorkerMapping(_Mapped):
    """The worker's side: the caller's buffer imported from the descriptor
    fd (the caller of this closes it: the import holds the memory), nbytes
    as the caller made it, mapped on `device`; `tensor` views it. Raises
    IpcError (the driver's refusal)."""

    def __init__(self, torch, device, fd, nbytes):
        if type(nbytes) is not int or nbytes <= 0:
            raise ValueError("the shared buffer's size must be a positive number of bytes")

        def make(ordinal):
            handle = _u64()
            _check(_driver().cuMemImportFromShareableHandle(ctypes.byref(handle),
                                                            ctypes.c_void_p(fd), _POSIX_FD),
                   "cuMemImportFromShareableHandle")
            return handle.value, nbytes

        super().__init__(torch, device, make)


class HostBuffer:
    """The same protocol in host memory (a memfd) for a Runner on the CPU
    that stages as a GPU's does (tests: `runner.staged = True`), so the
    staging's requests, pieces and fall-back run where there is no GPU."""

    def __init__(self, torch, nbytes):
        self.nbytes = nbytes
        self._fd = os.memfd_create("kreward-shared", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self.lock = threading.Lock()
        try:
            os.ftruncate(self._fd, nbytes)
            # sealed at its size, as the input region is: the worker's mapping
            # keeps a descriptor, and a shrink would make this process's next
            # copy SIGBUS (helper-37)
            fcntl.fcntl(self._fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self._map = mmap.mmap(self._fd, nbytes)
        except BaseException:
            os.close(self._fd)
            raise
        self.tensor = torch.frombuffer(self._map, dtype=torch.uint8)

    def export(self):
        return os.dup(self._fd)  # (not inheritable)

    def close(self):
        with self.lock:
            if self._fd is None:
                return
            self.tensor = None
            try:
                self._map.close()
            except BufferError:  # a view still held: the mapping goes with it
                pass
            finally:
                os.close(self._fd)
                self._fd = None


class HostMapping:
    """The worker's side of a HostBuffer (fd: the caller of this closes it)."""

    def __init__(self, torch, fd, nbytes):
        if type(nbytes) is not int or nbytes <= 0:
            raise ValueError("the shared buffer's size must be a positive number of bytes")
        self.nbytes, self._map = nbytes, mmap.mmap(fd, nbytes)
        self.tensor = torch.frombuffer(self._map, dtype=torch.uint8)


def new_buffer(torch, device, nbytes):
    """The caller's buffer for one worker on `device`: a device buffer on a
    GPU, host memory on the CPU."""
    if torch.device(device).type == "cpu":
        return HostBuffer(torch, nbytes)
    return CallerBuffer(torch, device, nbytes)


def map_buffer(torch, device, fd, nbytes):
    """The worker's mapping of the caller's buffer for `device`."""
    if torch.device(device).type == "cpu":
        return HostMapping(torch, fd, nbytes)
    return WorkerMapping(torch, device, fd, nbytes)
