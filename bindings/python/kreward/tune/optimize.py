"""`@optimize`: tune a Triton kernel or a CUDA source with knobs, and get
the best configuration and its report.

    @kreward.tune.optimize(problem="examples/problems/l2_softmax/problem.json",
                           knobs={"THREADS": [64, 128, 256, 512, 1024]},
                           max_evals=5, strategy="grid")
    def softmax():
        return open("examples/tune/softmax.cu").read()

    softmax.best        # {"THREADS": 256}
    softmax.speedup     # on the GPU; softmax.report: the best's report (a dict)

The search runs when the decorator is applied, and the name is bound to
the TuneResult (the decorated object is result.kernel). tune() is the same
as a function."""
from .env import TuneEnv
from .kernels import CudaKernel, TritonKernel
from .search import run


def make_kernel(obj, problem, knobs, constraints=(), grid=None, args=None, example_args=None,
                name=None):
    """A CudaKernel or TritonKernel for a @triton.jit function, a CUDA
    source string, or a function returning one."""
    if hasattr(obj, "warmup"):
        if grid is None or args is None or example_args is None:
            raise ValueError("a Triton kernel needs grid, args and example_args")
        return TritonKernel(obj, knobs, problem, grid, args, example_args, constraints, name)
    if isinstance(obj, str):
        return CudaKernel(obj, knobs, problem, constraints, name or "candidate.cu")
    if callable(obj):
        source = obj()
        if hasattr(source, "warmup"):  # a function returning the @triton.jit kernel
            return make_kernel(source, problem, knobs, constraints, grid, args, example_args,
                               name)
        if not isinstance(source, str):
            raise TypeError(f"{obj.__name__}() returned {type(source).__name__}, not the CUDA "
                            "source (a str)")
        return CudaKernel(source, knobs, problem, constraints,
                          name or f"{getattr(obj, '__name__', 'candidate')}.cu")
    raise TypeError(f"cannot tune {type(obj).__name__}: a @triton.jit function, a CUDA source "
                    "or a function returning one")


def tune(kernel, strategy="random", max_evals=32, batch_size=8, seed=0, backend=None,
         reward="makora", preset="fast", arch=None, **strategy_options):
    """Tunes a CudaKernel or TritonKernel; returns a TuneResult. backend:
    as TuneEnv's (None: $KREWARD_URL, $KREWARD_RAY or a local pool over
    every GPU; a backend given here is not closed)."""
    with TuneEnv(kernel, backend, reward=reward, preset=preset, arch=arch) as env:
        return run(env, strategy, max_evals, batch_size, seed, **strategy_options)


def optimize(max_evals=32, strategy="random", *, problem, knobs, constraints=(), grid=None,
             args=None, example_args=None, backend=None, reward="makora", preset="fast",
             batch_size=8, seed=0, arch=None, name=None, **strategy_options):
    """The decorator: see the module's docstring. knobs: {name: [values]};
    constraints: expressions over knobs and dims, or callables; Triton
    kernels also take grid, args and example_args (see TritonKernel)."""
    def wrap(obj):
        kernel = make_kernel(obj, problem, knobs, constraints, grid, args, example_args, name)
        result = tune(kernel, strategy, max_evals, batch_size, seed, backend, reward, preset,
                      arch, **strategy_options)
        result.kernel = obj
        return result
    return wrap
