"""kernelbench/triton_launchers.py: Triton's C launchers for the
candidates' kernel signatures, built by the library's code in a fresh
folder's ready and planted for later candidates; a candidate's report is a
hint whose worst is a launcher of a well-formed signature."""
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from kreward.kernelbench import triton_launchers as tl

STUBS = [p for p in ("/usr/local/cuda/lib64/stubs/libcuda.so",
                     "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so") if os.path.exists(p)]


@pytest.fixture
def wishes():
    tl.forget()
    yield
    tl.forget()


def test_a_signature_is_tritons_type_names_and_nothing_else():
    assert tl.signature(["*fp32", "*bf16", "i32", "constexpr"]) == ("*fp32", "*bf16", "i32", "constexpr")
    assert tl.signature(("*i1", "u64", "fp8e4nv", "*fp8e5")) == ("*i1", "u64", "fp8e4nv", "*fp8e5")
    for bad in (None, "i32", [], ["i32"] * (tl.MAX_ARGS + 1), ["*fp32", 3], ["int"], ["**fp32"],
                ["*fp32); system(\"id\"); //"], ["i32\n"], [["*fp32", "i32"]], ["nvTmaDesc"],
                ["tensordesc<fp32[16, 16]>"], {"0": "i32"}):
        assert tl.signature(bad) is None, bad


def test_the_wish_list_counts_well_formed_reports_most_named_first(wishes):
    a, b, c = ["*fp32", "*fp32", "i32", "constexpr"], ["*fp16", "i32"], ["*bf16", "*bf16", "i64"]
    assert tl.want([a, b, ["*fp32", "evil"], "junk", 7]) == 2
    assert tl.want([a, c]) == 2
    assert tl.want("not a list") == 0
    assert tl.to_build() == [a, b, c] or tl.to_build() == [a, c, b]
    assert tl.to_build(1) == [a]
    # a remembered folder holds a and c: asked no more, and not counted again
    tl.present([a, c, ["bad!"], None])
    assert tl.to_build() == [b]
    assert tl.want([a]) == 0
    assert tl.to_build() == [b]


def test_the_wish_list_is_bounded(wishes, monkeypatch):
    monkeypatch.setattr(tl, "MAX_WANTED", 3)
    sigs = [["*fp32"] * n for n in range(1, 6)]
    for s in sigs:
        tl.want([s])
    assert tl.to_build(10) == sigs[:3]
    assert tl.want([sigs[0]] * (tl.MAX_SEEN + 10)) == tl.MAX_SEEN  # a report counts MAX_SEEN at most


def test_only_a_signatures_types_make_the_launchers_source():
    """build makes each source from the types alone (no names, no
    constants): the same source, so the same cache entry, Triton's
    CudaLauncher makes for a kernel of that signature."""
    driver = pytest.importorskip("triton.backends.nvidia.driver", reason="Triton makes the sources")
    named = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    assert driver.make_launcher({"BLOCK": 1024}, named, None) == \
        driver.make_launcher({}, dict(enumerate(named.values())), None)


def test_a_launcher_built_ahead_is_what_tritons_own_launch_loads_in_another_candidates_folder(tmp_path):
    """In a fresh folder the library builds a signature's launcher (build);
    remember keeps it, plant gives it to a later candidate's folder, and
    Triton's own CudaLauncher there, for a kernel of that signature (named
    arguments, constants), loads it with the C compiler made to fail; the
    LauncherLog installed before it recorded the signature."""
    pytest.importorskip("triton.backends.nvidia.driver", reason="Triton builds the launchers")
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.skip("no C compiler: Triton cannot build a launcher here")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no Python.h: Triton cannot build a launcher here")
    if not STUBS:
        pytest.skip("no CUDA toolkit's libcuda stub to link a launcher against")
    libcuda = tmp_path / "libcuda"
    libcuda.mkdir()
    os.symlink(STUBS[0], libcuda / "libcuda.so.1")
    script = textwrap.dedent(f"""
        import os, types, json
        from kreward.kernelbench import triton_launchers as tl, triton_cache
        fresh, cand = {str(tmp_path / "fresh")!r}, {str(tmp_path / "cand")!r}
        os.makedirs(cand)
        os.environ["TRITON_CACHE_DIR"] = os.path.join(fresh, "triton")
        sig = ["*fp32", "*fp32", "i32", "constexpr"]
        built = tl.build([sig, ["*fp32", "bad"]])
        assert built == [sig], built
        assert triton_cache.remember(os.path.join(fresh, "triton")) == 1
        assert triton_cache.plant(None, cand, extra=triton_cache.remembered()) == 1
        os.environ["TRITON_CACHE_DIR"] = os.path.join(cand, "triton")
        from triton.runtime import build
        def no_compiler(*a, **k):
            raise AssertionError("Triton built the launcher again")
        build._build = no_compiler
        log = tl.LauncherLog()
        log.install()
        from triton.backends.nvidia import driver
        fn = types.SimpleNamespace(arg_names=["x_ptr", "out_ptr", "n", "BLOCK"])
        src = types.SimpleNamespace(fn=fn, constants={{"BLOCK": 256}},
                                    signature={{"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                               "BLOCK": "constexpr"}})
        meta = types.SimpleNamespace(num_ctas=1, global_scratch_size=0, global_scratch_align=1,
                                     profile_scratch_size=0, profile_scratch_align=1,
                                     launch_cooperative_grid=False, launch_pdl=False)
        driver.CudaLauncher(src, meta)
        print(json.dumps(log.report()))
    """)
    env = dict(os.environ, TRITON_LIBCUDA_PATH=str(libcuda),
               LD_LIBRARY_PATH=f"{libcuda}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == '[["*fp32", "*fp32", "i32", "constexpr"]]'


def test_only_a_start_workers_fresh_folder_builds_launchers_and_only_a_remembered_one_counts(
        tmp_path, wishes, monkeypatch):
    """The wish list goes to a "start" worker's fresh folder alone (its
    files remembered for every later candidate): never to a source's folder
    (a candidate may have written it), the reference's, an "init" worker's
    cache, a CPU worker, or a cache_dir where unsandboxed workers ran. A
    signature counts as present only where that folder was remembered."""
    pytest.importorskip("torch", reason="processes.py imports torch")
    from kreward.kernelbench import folders, triton_cache
    from kreward.kernelbench.processes import Processes
    monkeypatch.setattr(folders, "_marked", set())
    sig = ["*fp32", "i32"]
    tl.want([sig])
    p = Processes.__new__(Processes)
    p.device, p.sandbox, p.cache_dir, p._ref_source = "cuda:0", "start", str(tmp_path / "cache"), "REFERENCE"
    env = {"TRITON_CACHE_DIR": "x"}
    assert p._launchers_ahead(env, None) == [sig]
    assert p._launchers_ahead(env, "CANDIDATE") == [] and p._launchers_ahead(env, "REFERENCE") == []
    assert p._launchers_ahead(None, None) == []      # "init": the caller's own cache
    p.device = "cpu"
    assert p._launchers_ahead(env, None) == []
    p.device = "cuda:0"

    class Ready:
        ready_reply = {"ok": True, "launchers_ready": [sig]}

        def receive_ready(self, timeout_s):
            return self.ready_reply
    p.timeout_s = 5.0
    fresh = folders.fresh_folder(p.cache_dir)
    monkeypatch.setattr(triton_cache, "remember", lambda c: (_ for _ in ()).throw(OSError("unreadable")))
    p._name_fresh(Ready(), fresh, "FIRST")
    assert tl.to_build() == [sig]                     # not remembered: still wanted
    monkeypatch.setattr(triton_cache, "remember", lambda c: 0)
    p._name_fresh(Ready(), folders.fresh_folder(p.cache_dir), "SECOND")
    assert tl.to_build() == []
    folders.mark_unsandboxed(p.cache_dir)
    tl.want([["*fp16"]])
    assert p._launchers_ahead(env, None) == []
