"""Run by scripts/wheel-test.sh in the wheel's venv after
`pip install nvidia-cuda-nvrtc-cu12 nvidia-cuda-cupti-cu12`, with
KREWARD_CUDA_MAJOR=12: the library loads NVRTC 12 and CUPTI 12 from NVIDIA's
wheels in the same site-packages and compiles with NVRTC 12, in this process
and in a sandboxed pool worker. NVRTC needs no GPU.
Usage: python check_cuda12.py REPO_ROOT"""
import json
import os
import subprocess
import sys
import sysconfig

ROOT = sys.argv[1]
SITE = os.path.realpath(sysconfig.get_paths()["purelib"])

import kreward  # noqa: E402


def check(cond, what):
    if not cond:
        sys.exit(f"CUDA 12 check failed: {what}")
    print(f"ok: {what}")


with kreward.Context(no_device=True) as ctx:
    info = ctx.info()
    nv, cp = info["nvrtc"], info["cupti"]
    check(nv["loaded"] and nv["version"].startswith("12."), f"NVRTC {nv.get('version')} loaded "
          f"({nv.get('why', '')})")
    check(nv["source"] == "wheel" and os.path.realpath(nv["path"]) ==
          os.path.join(SITE, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"),
          f"NVRTC from the nvidia-cuda-nvrtc-cu12 wheel ({nv['path']}, {nv['source']})")
    check(cp["loaded"] and cp["api_version"] < 130000 and cp["source"] == "wheel" and
          os.path.realpath(cp["path"]) ==
          os.path.join(SITE, "nvidia", "cuda_cupti", "lib", "libcupti.so.12"),
          f"CUPTI 12 (API {cp.get('api_version')}) from the nvidia-cuda-cupti-cu12 wheel "
          f"({cp.get('path', cp.get('why'))})")
    check("sm_90" in nv["archs"], "NVRTC 12 targets sm_90 (the H200)")
    for name in sorted(os.listdir(os.path.join(ROOT, "examples", "problems"))):
        src = os.path.join(ROOT, "examples", "problems", name, "candidates", "fast.cu")
        prog = ctx.compile(open(src).read(), name=f"{name}/fast.cu")
        check(prog.arch == "sm_90a" and prog.kernels, f"{name}/fast.cu compiles with NVRTC 12 "
              f"for {prog.arch}")

# the CLI and a sandboxed compile worker load the same NVRTC 12 from the wheel
venv_bin = os.path.dirname(sys.executable)
cli = json.loads(subprocess.run([os.path.join(venv_bin, "kreward"), "info"], capture_output=True,
                                text=True, check=True).stdout)
check(cli["nvrtc"]["version"] == nv["version"], f"kreward info: NVRTC {cli['nvrtc']['version']}")
vadd = os.path.join(ROOT, "examples", "problems", "l1_vector_add")
with kreward.Context(no_device=True) as ctx, kreward.Pool(gpus="none", compile_workers=1) as pool:
    problem = ctx.load_problem(os.path.join(vadd, "problem.json"))
    report = pool.wait(pool.submit(problem, open(os.path.join(vadd, "candidates",
                                                              "fast.cu")).read()))
check(report.verdict == "not_run", f"a pool worker compiles with it (verdict {report.verdict}: "
      f"{report.feedback if report.verdict != 'not_run' else 'compiled, no GPU to run'})")
