"""kreward.tune: tune a kernel's launch and compile knobs (CUDA -D defines
and plan expressions; Triton meta-parameters, num_warps, num_stages) with
random, grid or PPO search, through a Gymnasium-style environment whose
reward is a kreward reward preset. docs/tuning.md."""
from .env import Result, TuneEnv
from .kernels import CudaKernel, TritonKernel, Variant
from .optimize import make_kernel, optimize, tune
from .search import TuneResult, run
from .space import KnobSpace

__all__ = ["CudaKernel", "KnobSpace", "Result", "TritonKernel", "TuneEnv", "TuneResult", "Variant",
           "make_kernel", "optimize", "run", "tune"]
