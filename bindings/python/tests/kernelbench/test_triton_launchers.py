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
    """Triton 3.6's own spelling (mangle_type: a bool is u1, a constant
    pointer *k...), and only what make_launcher has a C type for (no
    scalar fp8)."""
    assert tl.signature(["*fp32", "*bf16", "i32", "constexpr"]) == ("*fp32", "*bf16", "i32", "constexpr")
    assert tl.signature(("*u1", "u1", "u64", "*fp8e4nv", "*kfp16", "*kfp8e5")) is not None
    for bad in (None, "i32", [], ["i32"] * (tl.MAX_ARGS + 1), ["*fp32", 3], ["int"], ["**fp32"],
                ["*fp32); system(\"id\"); //"], ["i32\n"], [["*fp32", "i32"]], ["nvTmaDesc"],
                ["tensordesc<fp32[16, 16]>"], {"0": "i32"}, ["fp8e4nv"], ["*kk fp32"], ["k"]):
        assert tl.signature(bad) is None, bad


def test_every_type_triton_gives_an_argument_is_a_signature_make_launcher_can_build():
    """The types mangle_type gives each kind of argument pass signature,
    and every type signature accepts makes a launcher's source."""
    torch = pytest.importorskip("torch")
    jit = pytest.importorskip("triton.runtime.jit", reason="Triton names the types")
    from triton.backends.nvidia import driver
    args = [True, 3, 2 ** 40, 2 ** 63 + 5, 1.5, None] + [
        torch.zeros(1, dtype=d) for d in (torch.bool, torch.float32, torch.float16, torch.bfloat16,
                                          torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
                                          torch.float64, torch.float8_e4m3fn, torch.float8_e5m2)]
    types = [jit.mangle_type(a) for a in args]
    assert tl.signature(types) is not None, types
    for t in ["i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32",
              "fp64", "*fp8e4nv", "*kfp32", "constexpr"]:
        assert tl.signature([t]) is not None
        driver.make_launcher({}, {0: t}, None)


def test_the_wish_list_counts_each_report_once_most_named_first(wishes):
    a, b, c = ["*fp32", "*fp32", "i32", "constexpr"], ["*fp16", "i32"], ["*bf16", "*bf16", "i64"]
    assert tl.want([a, b, ["*fp32", "evil"], "junk", 7]) == 2
    assert tl.want([a, c, a, a, a]) == 2       # a named four times counts once
    assert tl.want("not a list") == 0
    assert tl.to_build(1, now=0.0) == [a]       # the most reported first, leased
    assert sorted(tl.to_build(now=1.0)) == sorted([b, c])  # a is leased to another ready
    assert tl.to_build(now=2.0) == []
    assert tl.to_build(1, now=tl.LEASE_S) == [a]  # its lease ran out (that ready was ended)


def test_a_ready_settles_what_was_built_kept_and_refused(wishes):
    """Of the signatures a fresh folder's ready was asked for: built and
    kept by the memo, present (asked no more, not counted again); not
    built, refused (Triton could not make it: never asked again); built
    but not kept (the memo full), still wanted."""
    a, b, c = ["*fp32", "i32"], ["*fp16", "i32"], ["*i8", "i64"]
    tl.want([a, b, c])
    asked = tl.to_build(now=0.0)
    tl.settle(asked, [[a, "AAAA"], [c, "CCCC"], ["junk", "X"]], kept=frozenset({"AAAA"}))
    assert tl.settled(a) == "present" and tl.settled(b) == "refused" and tl.settled(c) is None
    assert tl.want([a, b]) == 0
    assert tl.to_build(now=tl.LEASE_S) == [c]


def test_one_reports_flood_cannot_keep_the_others_out(wishes, monkeypatch):
    """The list holds MAX_WANTED signatures; a full list gives a signature
    named once its place, so an honest signature reported by many
    candidates gets in and stays among the most wanted."""
    monkeypatch.setattr(tl, "MAX_WANTED", 40)
    honest = ["*fp32", "*fp32", "i32"]
    tails = ["i8", "i16", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64", "u1", "*i8", "*u8"]
    for i in range(50):  # each round 16 signatures never named before
        tl.want([["*fp32"] * (1 + k % 60) + [tails[k // 60]] for k in range(16 * i, 16 * i + 16)])
        tl.want([honest])
    assert tl.to_build(1, now=0.0) == [honest]


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
        assert [b[0] for b in built] == [sig], built
        assert triton_cache.remember(os.path.join(fresh, "triton")) == 1
        assert triton_cache.remembered_names() == {{built[0][1]}}
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
    import kreward
    package = os.path.dirname(os.path.dirname(os.path.abspath(kreward.__file__)))
    env = dict(os.environ, TRITON_LIBCUDA_PATH=str(libcuda),
               LD_LIBRARY_PATH=f"{libcuda}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               PYTHONPATH=os.pathsep.join(p for p in (package, os.environ.get("PYTHONPATH")) if p))
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == '[["*fp32", "*fp32", "i32", "constexpr"]]'


def test_only_a_spares_fresh_folder_builds_launchers_and_only_a_kept_one_counts(tmp_path, wishes, monkeypatch):
    """The wish list goes to a "start" spare's fresh folder alone (its files
    remembered for every later candidate): never to a source's folder (a
    candidate may have written it), the reference's, an "init" worker's
    cache, a CPU worker, a cache_dir where unsandboxed workers ran, nor a
    memo with no room for another launcher. A signature counts as present
    only where the memo kept the entry the ready built it in."""
    pytest.importorskip("torch", reason="processes.py imports torch")
    from kreward.kernelbench import folders, triton_cache
    from kreward.kernelbench.processes import Processes
    monkeypatch.setattr(folders, "_marked", set())
    sig = ["*fp32", "i32"]
    tl.want([sig])
    p = Processes.__new__(Processes)
    p.device, p.sandbox, p.cache_dir, p._ref_source = "cuda:0", "start", str(tmp_path / "cache"), "REFERENCE"
    env = {"TRITON_CACHE_DIR": "x"}
    assert p._launchers_ahead(env, "CANDIDATE") == [] and p._launchers_ahead(env, "REFERENCE") == []
    assert p._launchers_ahead(None, None) == []      # "init": the caller's own cache
    p.device = "cpu"
    assert p._launchers_ahead(env, None) == []
    p.device = "cuda:0"
    monkeypatch.setattr(triton_cache, "launcher_room", lambda: False)
    assert p._launchers_ahead(env, None) == []
    monkeypatch.undo()
    monkeypatch.setattr(folders, "_marked", set())
    assert p._launchers_ahead(env, None) == [sig]    # (leased to this ready now)

    class Ready:
        launchers_asked = [sig]
        ready_reply = {"ok": True, "launchers_ready": [[sig, "ENTRY"]]}

        def receive_ready(self, timeout_s):
            return self.ready_reply
    p.timeout_s = 5.0
    kept = set()
    monkeypatch.setattr(triton_cache, "remember", lambda c: 0)
    monkeypatch.setattr(triton_cache, "remembered_names", lambda: frozenset(kept))
    p._name_fresh(Ready(), folders.fresh_folder(p.cache_dir), "FIRST")
    assert tl.settled(sig) is None                    # built, not kept: still wanted
    kept.add("ENTRY")
    monkeypatch.setattr(triton_cache, "remember", lambda c: (_ for _ in ()).throw(OSError("unreadable")))
    p._name_fresh(Ready(), folders.fresh_folder(p.cache_dir), "SECOND")
    assert tl.settled(sig) is None                    # not remembered at all: nothing settled
    monkeypatch.setattr(triton_cache, "remember", lambda c: 1)
    p._name_fresh(Ready(), folders.fresh_folder(p.cache_dir), "THIRD")
    assert tl.settled(sig) == "present"
    folders.mark_unsandboxed(p.cache_dir)
    tl.want([["*fp16"]])
    assert p._launchers_ahead(env, None) == []


def test_the_memo_keeps_max_launchers_and_the_library_kernels_past_them(tmp_path, monkeypatch):
    """Launchers have their own bound in the memo (every entry kept is
    planted in every later folder): past MAX_LAUNCHERS none is kept, and
    launcher_room says so, while a library kernel's entry still is."""
    from kreward.kernelbench import triton_cache
    triton_cache.forget()
    monkeypatch.setattr(triton_cache, "MAX_LAUNCHERS", 2)
    cache = tmp_path / "fresh" / "triton"
    for i in range(3):
        d = cache / (chr(ord("A") + i) * 52)
        d.mkdir(parents=True)
        (d / triton_cache.LAUNCHER).write_bytes(b"module %d" % i)
    try:
        assert triton_cache.remember(str(cache)) == 2
        assert not triton_cache.launcher_room()
        d = cache / "MASKKEY"
        d.mkdir()
        (d / "chacha_xor_kernel.cubin").write_bytes(b"x")
        (d / "__grp__chacha_xor_kernel.json").write_text(
            '{"child_paths": {"chacha_xor_kernel.cubin": "%s"}}' % (d / "chacha_xor_kernel.cubin"))
        assert triton_cache.remember(str(cache)) == 1
        assert "MASKKEY" in triton_cache.remembered_names()
    finally:
        triton_cache.forget()
