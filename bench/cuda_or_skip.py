"""The GPU experiments' common start (bench_staging, gpu_idle_clock, profiler_start_cost,
kernelbench_timing_noise, process_placement, profiler_after_cost): torch
with a CUDA device, or a line saying why not, after which the experiment
exits 0 (CI and this project's machine have no GPU). Imported as a sibling:
each experiment runs as `python3 bench/<name>.py`, so bench/ is on sys.path."""


def cuda_torch(name):
    """torch when it sees a CUDA device; else None, having printed
    "<name>: needs a GPU (skipped): <why>"."""
    try:
        import torch
    except ImportError as e:
        why = str(e)
    else:
        if torch.cuda.is_available():
            return torch
        why = "torch sees no CUDA device"
    print(f"{name}: needs a GPU (skipped): {why}")
    return None
