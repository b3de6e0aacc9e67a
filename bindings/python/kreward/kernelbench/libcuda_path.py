"""Where Triton finds libcuda: it asks /sbin/ldconfig unless
TRITON_LIBCUDA_PATH says, and a sandbox that refuses exec (the ModelNew
worker's, vetting's measure process) makes that a PermissionError inside
torch.compile or a Triton launch. The libcuda this process already loaded
says where it is. Standard library only (the worker loads it by path)."""
import os


def point_triton_at_loaded_libcuda():
    """Sets TRITON_LIBCUDA_PATH to the folder of the loaded libcuda.so, when
    unset and one is loaded (after CUDA's init); the folder, or None."""
    if "TRITON_LIBCUDA_PATH" in os.environ:
        return os.environ["TRITON_LIBCUDA_PATH"]
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "/libcuda.so" in line:
                os.environ["TRITON_LIBCUDA_PATH"] = os.path.dirname(line.split()[-1])
                return os.environ["TRITON_LIBCUDA_PATH"]
    return None
