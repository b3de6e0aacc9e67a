"""kernelbench/triton_cache.py: the library's Triton kernels, as the
reference's worker compiled them, planted in a candidate's Triton cache;
never a write through a path the candidate's folder could hold."""
import ast
import json
import os
import pathlib

import pytest

from kreward.kernelbench import triton_cache

KB_DIR = pathlib.Path(__file__).resolve().parents[2] / "kreward" / "kernelbench"


def jit_functions(path):
    tree = ast.parse(path.read_text())
    return {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and any(
        "triton.jit" in ast.unparse(d) for d in f.decorator_list)}


def test_the_library_kernels_are_the_jit_functions_of_the_mask_and_the_commitment():
    assert triton_cache.LIBRARY_KERNELS == (jit_functions(KB_DIR / "keystream_triton.py") |
                                            jit_functions(KB_DIR / "commit_triton.py")) - {
        "_rotl", "_qr", "_xor_word", "_block_words", "_tile", "_store_sums"}  # inlined helpers, no entries of their own


def entry(cache, key, kernel, extra=b"x" * 100):
    """A Triton cache entry as Triton 3 writes one: the kernel's files and
    the group file naming them by absolute path."""
    d = cache / key
    d.mkdir(parents=True)
    files = {f"{kernel}.cubin": extra, f"{kernel}.json": b"{}", f"{kernel}.ptx": b"ptx"}
    for name, data in files.items():
        (d / name).write_bytes(data)
    (d / f"__grp__{kernel}.json").write_text(json.dumps(
        {"child_paths": {name: str(d / name) for name in files}}))
    return d


@pytest.fixture
def baseline_cache(tmp_path):
    cache = tmp_path / "reference" / "triton"
    entry(cache, "MASKKEY", "chacha_xor_tile_kernel")
    entry(cache, "SUMSKEY", "mixed_sums_kernel")
    entry(cache, "INDUCTORKEY", "triton_poi_fused_add_0")   # the reference's own: not copied
    entry(cache, "HUGEKEY", "chacha_xor_kernel", extra=b"x" * (triton_cache.MAX_ENTRY_BYTES + 1))
    (cache / "tmp.pid_7_abc").mkdir()                        # Triton writing: not an entry
    return cache


def test_planted_entries_are_found_by_triton_in_the_candidates_folder(tmp_path, baseline_cache,
                                                                      monkeypatch):
    ext = tmp_path / "candidate"
    ext.mkdir()
    assert triton_cache.plant(str(baseline_cache), str(ext)) == 2
    assert sorted(os.listdir(ext / "triton")) == ["MASKKEY", "SUMSKEY"]
    group = json.loads((ext / "triton" / "MASKKEY" / "__grp__chacha_xor_tile_kernel.json").read_text())
    assert all(p.startswith(str(ext / "triton" / "MASKKEY")) for p in group["child_paths"].values())
    # Triton's own cache manager, pointed at the candidate's folder, finds them
    cache_mod = pytest.importorskip("triton.runtime.cache", reason="Triton reads the cache")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(ext / "triton"))
    found = cache_mod.FileCacheManager("MASKKEY").get_group("chacha_xor_tile_kernel.json")
    assert found and set(found) == {"chacha_xor_tile_kernel.cubin", "chacha_xor_tile_kernel.json",
                                    "chacha_xor_tile_kernel.ptx"}
    assert all(pathlib.Path(p).read_bytes() for p in found.values())
    # a second plant leaves what is there
    assert triton_cache.plant(str(baseline_cache), str(ext)) == 0


def test_nothing_is_written_through_a_link_the_candidate_left(tmp_path, baseline_cache):
    """A candidate's worker writes its own folder: it can leave ext/triton,
    or an entry's folder, as a link to the trainer's files."""
    outside = tmp_path / "trainer"
    outside.mkdir()
    ext = tmp_path / "candidate"
    ext.mkdir()
    (ext / "triton").symlink_to(outside)
    assert triton_cache.plant(str(baseline_cache), str(ext)) == 0
    (ext / "triton").unlink()
    (ext / "triton").mkdir()
    (ext / "triton" / "MASKKEY").symlink_to(outside)
    (ext / "triton" / "SUMSKEY").write_text("not a folder")
    assert triton_cache.plant(str(baseline_cache), str(ext)) == 0
    assert os.listdir(outside) == []
    # and ext itself a link: refused
    (tmp_path / "link").symlink_to(outside)
    with pytest.raises(OSError):
        triton_cache.plant(str(baseline_cache), str(tmp_path / "link"))
    assert os.listdir(outside) == []


def test_a_group_naming_a_file_the_entry_lacks_is_not_planted(tmp_path):
    cache = tmp_path / "ref"
    d = entry(cache, "KEY", "chacha_xor_kernel")
    (d / "chacha_xor_kernel.ptx").unlink()
    ext = tmp_path / "cand"
    ext.mkdir()
    assert triton_cache.plant(str(cache), str(ext)) == 0
    assert not (ext / "triton" / "KEY").exists()  # not half an entry either
    assert triton_cache.plant(str(tmp_path / "no-cache"), str(ext)) == 0


def test_the_references_folder_is_read_as_untrusted(tmp_path):
    """A link to a secret, a FIFO, a group file nested past the parser's
    depth: none is followed, waited on or raised; the entry's regular files
    are planted, a group that cannot be read leaves its entry out."""
    cache = tmp_path / "ref"
    d = entry(cache, "KEY", "chacha_xor_kernel")
    (tmp_path / "secret").write_text("the trainer's token")
    (d / "chacha_xor_kernel.llir").symlink_to(tmp_path / "secret")
    os.mkfifo(d / "chacha_xor_kernel.ttir")
    deep = entry(cache, "DEEP", "mixed_sums_kernel")
    (deep / "__grp__mixed_sums_kernel.json").write_text("[" * 100000 + "]" * 100000)
    ext = tmp_path / "cand"
    ext.mkdir()
    assert triton_cache.plant(str(cache), str(ext)) == 1
    assert sorted(os.listdir(ext / "triton")) == ["KEY"]
    assert sorted(os.listdir(ext / "triton" / "KEY")) == [
        "__grp__chacha_xor_kernel.json", "chacha_xor_kernel.cubin", "chacha_xor_kernel.json",
        "chacha_xor_kernel.ptx"]


def module_entry(cache, name, key, data=b"\x7fELF module"):
    """A host module's entry as triton/runtime/build.py writes one: the
    .so alone in a folder named by a sha256 in base32."""
    d = cache / key
    d.mkdir(parents=True)
    (d / name).write_bytes(data)
    return d


def test_tritons_host_modules_are_planted_and_nothing_else_that_looks_like_one(tmp_path):
    """The driver's helper and the launchers: one regular file of the two
    names in a folder named as Triton names it; a folder of another name, a second file,
    another file name or an oversized module is not copied."""
    suffix = next(iter(triton_cache.HOST_MODULES)).split(".", 1)[1]
    cache = tmp_path / "ref"
    good = [module_entry(cache, f"cuda_utils.{suffix}", key="A" * 52),
            module_entry(cache, f"__triton_launcher.{suffix}", key="B" * 52)]
    (good[1] / "tmp.pid_3_x").mkdir()                         # Triton writing beside it
    module_entry(cache, f"__triton_launcher.{suffix}", key="a" * 52)
    two = module_entry(cache, f"__triton_launcher.{suffix}", key="C" * 52)
    (two / "payload.so").write_bytes(b"more")
    module_entry(cache, f"candidate_ext.{suffix}", key="D" * 52)
    module_entry(cache, f"__triton_launcher.{suffix}", key="E" * 52,
                 data=b"x" * (triton_cache.MAX_MODULE_BYTES + 1))
    (tmp_path / "secret.so").write_bytes(b"elsewhere")
    linked = cache / ("F" * 52)
    linked.mkdir()
    (linked / f"cuda_utils.{suffix}").symlink_to(tmp_path / "secret.so")
    ext = tmp_path / "cand"
    ext.mkdir()
    assert triton_cache.plant(str(cache), str(ext)) == 2
    assert sorted(os.listdir(ext / "triton")) == ["A" * 52, "B" * 52]
    assert os.listdir(ext / "triton" / ("B" * 52)) == [f"__triton_launcher.{suffix}"]
    assert (ext / "triton" / ("A" * 52) / f"cuda_utils.{suffix}").read_bytes() == b"\x7fELF module"


def test_a_planted_launcher_is_what_triton_loads_instead_of_building(tmp_path, monkeypatch):
    """A real module built by Triton's own build function into the
    reference's cache, planted, and loaded from the candidate's cache with
    the host compiler made to fail: Triton did not build it again."""
    build = pytest.importorskip("triton.runtime.build", reason="Triton builds the modules")
    import shutil
    import sysconfig
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: Triton cannot build a module here")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no Python.h: Triton cannot build a module here")
    src = ("#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "
           "\"__triton_launcher\", NULL, -1, NULL};\n"
           "PyMODINIT_FUNC PyInit___triton_launcher(void) { return PyModule_Create(&m); }\n")
    ref, ext = tmp_path / "ref", tmp_path / "cand"
    ext.mkdir()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(ref / "triton"))
    build.compile_module_from_src(src, "__triton_launcher")
    assert triton_cache.plant(str(ref / "triton"), str(ext)) == 1
    monkeypatch.setenv("TRITON_CACHE_DIR", str(ext / "triton"))

    def no_compiler(*a, **k):
        raise AssertionError("Triton built the module again")
    monkeypatch.setattr(build, "_build", no_compiler)
    mod = build.compile_module_from_src(src, "__triton_launcher")
    assert mod.__file__.startswith(str(ext / "triton"))


def test_a_planted_file_appears_whole_under_its_name_or_not_at_all(tmp_path, monkeypatch):
    """Triton loads a module it finds by name: the name must never stand
    for half a file. Each file is written under a temporary name and linked;
    one that a worker in the folder wrote first is left as it is, and the
    other entries are still planted."""
    suffix = next(iter(triton_cache.HOST_MODULES)).split(".", 1)[1]
    cache = tmp_path / "ref"
    module_entry(cache, f"cuda_utils.{suffix}", "A" * 52, data=b"whole module")
    module_entry(cache, f"__triton_launcher.{suffix}", "B" * 52)
    ext = tmp_path / "cand"
    ext.mkdir()
    seen = []
    real_link = os.link

    def watching_link(src, dst, **kw):
        seen.append((src, dst))
        fd = kw["dst_dir_fd"]
        if dst.startswith("__triton_launcher"):  # a worker's Triton wrote this name first
            with open(os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as f:
                f.write(b"the worker's own")
        real_link(src, dst, **kw)
        # when the name appears, the file behind it is complete
        with open(os.open(dst, os.O_RDONLY, dir_fd=fd), "rb") as f:
            assert f.read() == b"whole module"
    monkeypatch.setattr(triton_cache.os, "link", watching_link)
    assert triton_cache.plant(str(cache), str(ext)) == 1
    assert sorted(d for _, d in seen) == sorted(triton_cache.HOST_MODULES)
    assert all(s.startswith("tmp.") for s, _ in seen)
    for key in ("A" * 52, "B" * 52):  # no temporary left behind
        assert len(os.listdir(ext / "triton" / key)) == 1
    assert (ext / "triton" / ("B" * 52) / f"__triton_launcher.{suffix}").read_bytes() == b"the worker's own"


def test_a_worker_started_before_the_reference_compiled_gets_the_kernels_before_its_verify(tmp_path, memo,
                                                                                           monkeypatch):
    """A problem's first candidate's worker starts beside the reference's,
    before that one compiled the library's kernels (all or some): nothing,
    or not everything, to plant then. plant_late plants what is there by
    its verify, and nothing twice; the "init" sandbox's workers use the
    caller's own cache: nothing planted there."""
    from kreward.kernelbench import folders
    pytest.importorskip("torch", reason="processes.py imports torch")
    from kreward.kernelbench.processes import Processes
    monkeypatch.setattr(folders, "_marked", set())  # (this process's other tests' "init" Runners)
    p = Processes.__new__(Processes)  # only what planting reads
    p.device, p.sandbox, p.cache_dir, p._ref_source = "cuda:0", "start", str(tmp_path), "REFERENCE"
    ext = folders.source_folder(str(tmp_path), "CANDIDATE")

    class Worker:
        folder = ext
    w = Worker()
    assert p._plant(ext, "CANDIDATE") == 0  # the reference's worker has compiled nothing yet
    ref_cache = pathlib.Path(folders.source_folder(str(tmp_path), "REFERENCE")) / "triton"
    entry(ref_cache, "MASKKEY", "chacha_xor_tile_kernel")
    p.plant_late(w, "CANDIDATE")
    assert os.listdir(os.path.join(ext, "triton")) == ["MASKKEY"]
    # the reference compiled one more meanwhile: planted, the first left as it was
    mask = pathlib.Path(ext) / "triton" / "MASKKEY" / "chacha_xor_tile_kernel.cubin"
    before = mask.stat().st_ino
    entry(ref_cache, "SUMSKEY", "mixed_sums_kernel")
    p.plant_late(w, "CANDIDATE")
    assert sorted(os.listdir(os.path.join(ext, "triton"))) == ["MASKKEY", "SUMSKEY"]
    assert mask.stat().st_ino == before
    other = folders.source_folder(str(tmp_path), "OTHER")

    class InitWorker:
        folder = other
    p.sandbox = "init"
    p.plant_late(InitWorker(), "OTHER")
    assert not os.path.exists(os.path.join(other, "triton"))


def test_a_cache_dir_where_unsandboxed_workers_ran_is_trusted_for_nothing(tmp_path, memo, monkeypatch):
    """helper-34: an "init" Runner's candidates have threads started before
    their sandbox, with the user's file access: on a cache_dir they share
    with "start" Runners they could leave a module in a fresh spare's folder
    or the reference's, loaded before the isolation filter. An "init" (or
    unsandboxed) Runner marks its cache_dir; a "start" one there then loads
    nothing from a Triton cache in ready and plants nothing."""
    from kreward.kernelbench import folders
    pytest.importorskip("torch", reason="processes.py imports torch")
    from kreward.kernelbench.processes import Processes
    monkeypatch.setattr(folders, "_marked", set())  # (this process's other tests' "init" Runners)
    p = Processes.__new__(Processes)  # only what trusting and planting read
    p.device, p.sandbox, p.cache_dir, p._ref_source = "cuda:0", "start", str(tmp_path / "cache"), "REFERENCE"
    ref_cache = pathlib.Path(folders.source_folder(p.cache_dir, "REFERENCE")) / "triton"
    entry(ref_cache, "MASKKEY", "chacha_xor_tile_kernel")
    env = {"TRITON_CACHE_DIR": "x"}
    assert p._trusted_cache(env, None) and p._trusted_cache(env, "REFERENCE")
    assert not p._trusted_cache(env, "CANDIDATE")
    assert p._plant(folders.source_folder(p.cache_dir, "FIRST"), "FIRST") == 1
    # an "init" Runner on the same cache_dir
    Processes(device="cpu", sandbox="init", staging="auto", cache_dir=p.cache_dir, ref_source="",
              problem={}, inputs_from="caller", staged=False, region_bytes=0, max_call_bytes=0,
              spare=False, compile_baseline=False, timeout_s=5.0, zygote=False)
    assert folders.unsandboxed(p.cache_dir)
    assert not p._trusted_cache(env, None) and not p._trusted_cache(env, "REFERENCE")
    assert p._trusted_cache(None, None)  # an "init" worker's own cache (the caller's): as before
    second = folders.source_folder(p.cache_dir, "SECOND")
    assert p._plant(second, "SECOND") == 0 and not os.path.exists(os.path.join(second, "triton"))
    # the file removed (an "init" candidate has the user's file access): this
    # process remembers what it marked
    os.unlink(os.path.join(p.cache_dir, ".kreward-unsandboxed-workers"))
    assert folders.unsandboxed(p.cache_dir) and not p._trusted_cache(env, None)
    # a "start" Runner that falls back to "init" marks its cache_dir too
    q = Processes.__new__(Processes)
    q.cache_dir, q.baseline, q.spare = str(tmp_path / "other"), None, None
    q.lane_spares = q.spare_source = q.spare_folder = None
    q._fall_back_to_init("CUDA would not start in the sandbox")
    assert folders.unsandboxed(q.cache_dir)


@pytest.fixture
def memo():
    triton_cache.forget()
    yield
    triton_cache.forget()


def test_a_fresh_folders_library_entries_are_remembered_and_planted_for_later_workers(tmp_path, baseline_cache,
                                                                                      memo, monkeypatch):
    """remember keeps the library's entries of a fresh folder (its worker
    ran only the library's code), nothing else of it; plant gives them to
    a candidate's folder whose reference's folder has none yet; a second
    remember of a folder with nothing new reads no file."""
    ext = tmp_path / "cand"
    ext.mkdir()
    assert triton_cache.remember(str(baseline_cache)) == 2
    assert sorted(triton_cache.remembered()) == ["MASKKEY", "SUMSKEY"]
    empty_reference = tmp_path / "reference-not-ready" / "triton"
    assert triton_cache.plant(str(empty_reference), str(ext)) == 0  # nothing without the memo
    assert triton_cache.plant(str(empty_reference), str(ext), extra=triton_cache.remembered()) == 2
    group = json.loads((ext / "triton" / "SUMSKEY" / "__grp__mixed_sums_kernel.json").read_text())
    assert all(p.startswith(str(ext / "triton" / "SUMSKEY")) for p in group["child_paths"].values())
    reads = []
    monkeypatch.setattr(triton_cache, "library_entries", lambda c: reads.append(c) or {})
    # the foreign entry was passed over; an entry of a library kernel not
    # kept (here: oversized) makes the folder read again
    assert triton_cache.remember(str(baseline_cache)) == 0 and reads == [str(baseline_cache)]
    reads.clear()
    (baseline_cache / "HUGEKEY").rename(tmp_path / "HUGEKEY")
    assert triton_cache.remember(str(baseline_cache)) == 0 and reads == []
    entry(baseline_cache, "NEWKEY", "chacha_xor_joined_kernel")
    assert triton_cache.remember(str(baseline_cache)) == 0 and reads == [str(baseline_cache)]


def test_the_memo_keeps_no_more_than_its_bound(tmp_path, memo, monkeypatch):
    cache = tmp_path / "fresh" / "triton"
    entry(cache, "K1", "chacha_xor_kernel", extra=b"x" * 4000)
    entry(cache, "K2", "mixed_sums_kernel", extra=b"x" * 4000)
    monkeypatch.setattr(triton_cache, "MAX_REMEMBERED_BYTES", 6000)
    assert triton_cache.remember(str(cache)) == 1
    assert len(triton_cache.remembered()) == 1


def test_a_process_that_ran_unsandboxed_workers_remembers_and_plants_nothing(tmp_path, baseline_cache, memo,
                                                                             monkeypatch):
    """Their candidates' threads had the user's file access: a module one
    of them dropped into a fresh folder of another cache_dir would reach
    every later worker through the memo."""
    pytest.importorskip("torch", reason="processes.py imports the worker's helpers")
    from kreward.kernelbench import folders
    from kreward.kernelbench.processes import Processes
    monkeypatch.setattr(folders, "_marked", set())
    clean = Processes.__new__(Processes)  # only what remembering reads
    clean.device, clean.cache_dir = "cuda", str(tmp_path / "clean")
    fresh = tmp_path / "clean" / "spare-1"
    fresh.mkdir(parents=True)
    baseline_cache.rename(fresh / "triton")
    folders.mark_unsandboxed(str(tmp_path / "other"))
    Processes._remember_library(clean, str(fresh))
    assert triton_cache.remembered() == {}
    folders._marked.clear()
    Processes._remember_library(clean, str(fresh))
    assert sorted(triton_cache.remembered()) == ["MASKKEY", "SUMSKEY"]


def fake_processes(tmp_path, ref_cache):
    """A Processes with only what planting and remembering read (the
    reference's folder: ref_cache's parent)."""
    from kreward.kernelbench.processes import Processes
    p = Processes.__new__(Processes)
    p.device, p.sandbox, p.cache_dir, p._ref_source = "cuda", "start", str(tmp_path / "cache"), "REF"
    p._folder = lambda source: str(ref_cache.parent)
    return p


def test_a_fresh_folder_gets_the_memo_alone_so_a_reference_reaches_no_other_problem(tmp_path, baseline_cache,
                                                                                    memo, monkeypatch):
    """A problem's reference code writes its own folder: what it leaves
    there under a library kernel's name is planted in that problem's
    candidates' folders, never in a fresh folder, whose entries after its
    ready the process remembers for every problem."""
    pytest.importorskip("torch", reason="processes.py imports the worker's helpers")
    from kreward.kernelbench import folders
    from kreward.kernelbench.processes import Processes
    monkeypatch.setattr(folders, "_marked", set())
    entry(baseline_cache, "FORGEDKEY", "chacha_xor_kernel", extra=b"the reference's cubin")
    (tmp_path / "cache").mkdir()
    p = fake_processes(tmp_path, baseline_cache)
    fresh = tmp_path / "cache" / "spare-1"
    fresh.mkdir()
    assert Processes._plant(p, str(fresh), None) == 0  # nothing remembered yet: nothing planted
    Processes._remember_library(p, str(fresh))
    assert triton_cache.remembered() == {}
    # the library's own compile in a fresh folder: remembered, then planted
    # in the next fresh folder and in a source's folder (with the reference's)
    entry(fresh / "triton", "LIBKEY", "mixed_sums_kernel")
    Processes._remember_library(p, str(fresh))
    assert sorted(triton_cache.remembered()) == ["LIBKEY"]
    second = tmp_path / "cache" / "spare-2"
    second.mkdir()
    assert Processes._plant(p, str(second), None) == 1
    assert sorted(os.listdir(second / "triton")) == ["LIBKEY"]
    own = tmp_path / "cache" / "source-folder"
    own.mkdir()
    assert Processes._plant(p, str(own), "a candidate's source") == 4
    assert "FORGEDKEY" in os.listdir(own / "triton") and "LIBKEY" in os.listdir(own / "triton")
    # a process that ran unsandboxed workers plants no memo
    folders.mark_unsandboxed(str(tmp_path / "elsewhere"))
    third = tmp_path / "cache" / "source-folder-2"
    third.mkdir()
    assert Processes._plant(p, str(third), "another source") == 3
    assert "LIBKEY" not in os.listdir(third / "triton")


def test_a_half_written_entry_is_not_remembered_and_a_library_entry_is_never_passed_over(tmp_path, memo):
    cache = tmp_path / "fresh" / "triton"
    half = entry(cache, "HALF", "chacha_xor_kernel")
    (half / "chacha_xor_kernel.ptx").unlink()          # its group names a file not (yet) there
    bare = cache / "BARE"                               # a kernel's files, its group not yet written
    bare.mkdir()
    (bare / "chacha_xor_joined_kernel.cubin").write_bytes(b"x")
    entry(cache, "OTHER", "triton_poi_fused_add_0")     # another kernel: passed over
    assert triton_cache.remember(str(cache)) == 0
    assert triton_cache._passed == {"OTHER"}
    # written whole later: remembered then
    (half / "chacha_xor_kernel.ptx").write_bytes(b"ptx")
    assert triton_cache.remember(str(cache)) == 1 and sorted(triton_cache.remembered()) == ["HALF"]
