"""kr_sandbox_enter from Python (kreward.sandbox.enter): a child process
enters the sandbox and tries things; each outcome is what the sandbox must
do. The checks of a layer the kernel lacks are skipped with its why (never
passed). The test process itself is never sandboxed."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

import kreward
from kreward import sandbox

OFFERED = kreward.Pool.sandbox()
needs_landlock = pytest.mark.skipif(not OFFERED["landlock"], reason=f"no Landlock: {OFFERED['landlock_why']}")
needs_seccomp = pytest.mark.skipif(not OFFERED["seccomp"], reason=f"no seccomp: {OFFERED['seccomp_why']}")

# What the child runs: enter with argv[1] (a JSON spec) then each probe in
# argv[2] (JSON), printing one JSON line: the status and per probe "ok" or
# the errno it got.
CHILD = textwrap.dedent("""
    import errno, json, os, socket, subprocess, sys, threading
    from kreward import sandbox
    status = sandbox.enter_json(sys.argv[1])
    out = {}
    def attempt(name, f):
        try:
            f()
            out[name] = "ok"
        except OSError as e:
            out[name] = errno.errorcode.get(e.errno, str(e.errno))
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
    for kind, arg in json.loads(sys.argv[2]):
        if kind == "read":
            attempt("read " + arg, lambda: open(arg, "rb").read(1))
        elif kind == "write":
            attempt("write " + arg, lambda: open(arg, "w").write("x"))
        elif kind == "socket":
            attempt("socket " + arg, lambda: socket.socket(getattr(socket, arg)).close())
        elif kind == "exec":
            attempt("exec " + arg, lambda: subprocess.run([arg], check=True))
        elif kind == "exec_read":  # a started program's own reads
            cat = subprocess.run(["/bin/cat", arg], capture_output=True, text=True)
            out["exec_read " + arg] = "ok" if cat.returncode == 0 else cat.stderr.strip()
        elif kind == "write_bytes":  # [path, n]: a file of n bytes, SIGXFSZ ignored (EFBIG)
            import signal
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            def write_all(path, n):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                try:
                    data = memoryview(bytes(n))
                    while data:  # a short write at the limit, then EFBIG
                        data = data[os.write(fd, data):]
                finally:
                    os.close(fd)
            attempt(f"write_bytes {arg[1]}", lambda: write_all(*arg))
        elif kind == "read_task":  # this thread's own /proc/self/task/<tid>/<arg>
            path = f"/proc/self/task/{threading.get_native_id()}/{arg}"
            attempt("read_task " + arg, lambda: open(path, "rb").read(1))
        elif kind == "enter":
            attempt("enter", lambda: out.__setitem__("status2", sandbox.enter_json(arg)))
    print(json.dumps({"status": status, **out}))
""")


def run_child(spec, probes):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings" / "python"))
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec), json.dumps(probes)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def python_reads():
    """What a Python child needs to go on importing after it entered."""
    import sysconfig
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return sorted(paths | {str(ROOT / "bindings" / "python"), "/usr/lib", "/lib", "/lib64",
                           "/usr/lib64", "/etc/ld.so.cache", os.path.dirname(kreward.library_path)})


@pytest.fixture
def trees(tmp_path):
    r, w, o = tmp_path / "r", tmp_path / "w", tmp_path / "o"
    for d in (r, w, o):
        d.mkdir()
    (r / "allowed.txt").write_text("allowed")
    (o / "secret.txt").write_text("secret")
    return r, w, o


@needs_landlock
@needs_seccomp
def test_entered_process_reads_only_its_trees_has_no_network_no_exec(trees):
    r, w, o = trees
    spec = {"read": python_reads() + [str(r)], "write": [str(w)]}
    res = run_child(spec, [["read", str(r / "allowed.txt")], ["read", "/etc/passwd"],
                           ["read", str(o / "secret.txt")], ["read", f"/proc/{os.getpid()}/environ"],
                           ["read", "/proc/self/environ"], ["write", str(w / "new.txt")],
                           ["write", str(r / "new.txt")], ["write", str(o / "new.txt")],
                           ["socket", "AF_INET"], ["socket", "AF_INET6"], ["socket", "AF_UNIX"],
                           ["exec", "/bin/true"]])
    st = res["status"]
    assert st["landlock"] and st["seccomp"] and st["no_new_privs"] and not st["exec"]
    assert res["read " + str(r / "allowed.txt")] == "ok"
    for denied in ("/etc/passwd", str(o / "secret.txt"), f"/proc/{os.getpid()}/environ",
                   "/proc/self/environ"):
        assert res["read " + denied] == "EACCES", denied
    assert res["write " + str(w / "new.txt")] == "ok" and (w / "new.txt").read_text() == "x"
    assert res["write " + str(r / "new.txt")] == "EACCES" and not (r / "new.txt").exists()
    assert res["write " + str(o / "new.txt")] == "EACCES"
    assert res["socket AF_INET"] == "EPERM" and res["socket AF_INET6"] == "EPERM"
    assert res["socket AF_UNIX"] == "ok"
    assert res["exec /bin/true"] == "EPERM"


@needs_landlock
@needs_seccomp
def test_exec_phase_then_sealed(trees):
    """exec allowed (a compile phase): programs under the read trees run and
    inherit the sandbox, a program dropped in the write tree does not run;
    entering again without exec closes it."""
    r, w, o = trees
    dropped = w / "dropped"
    dropped.write_bytes(open("/bin/true", "rb").read())
    dropped.chmod(0o755)
    reads = python_reads() + [str(r), "/bin", "/usr/bin"]
    spec = {"read": reads, "write": [str(w)], "exec": True}
    seal = json.dumps({"read": reads, "write": [str(w)]})
    res = run_child(spec, [["exec", "/bin/true"], ["exec_read", str(r / "allowed.txt")],
                           ["exec_read", "/etc/passwd"], ["exec", str(dropped)],
                           ["enter", seal], ["exec", "/usr/bin/true"]])
    assert res["status"]["exec"] is True
    assert res["exec /bin/true"] == "ok"
    assert res["exec_read " + str(r / "allowed.txt")] == "ok"
    # cat ran and was refused the file: the started program is in the sandbox
    assert res["exec_read /etc/passwd"].endswith("Permission denied"), res
    assert res["exec " + str(dropped)] == "EACCES"
    assert res["enter"] == "ok" and res["status2"]["exec"] is False and res["status2"]["landlock"]
    assert res["exec /usr/bin/true"] == "EPERM"


@needs_seccomp
def test_limits_only_when_first_entering(trees):
    _, w, _ = trees
    res = run_child({"read": python_reads(), "write": [str(w)]},
                    [["enter", json.dumps({"cpu_seconds": 5})]])
    assert "KR_EUNSUPPORTED" in res["enter"] and "limits are set when first entering" in res["enter"]


@needs_landlock
def test_file_bytes_bounds_every_file(trees):
    """file_bytes (RLIMIT_FSIZE): a worker that may write its build folder
    cannot grow one file past the limit and fill the caller's disk."""
    _, w, _ = trees
    res = run_child({"read": python_reads(), "write": [str(w)], "file_bytes": 1 << 16},
                    [["write_bytes", [str(w / "ok.bin"), 1 << 16]],
                     ["write_bytes", [str(w / "big.bin"), (1 << 16) + 1]]])
    assert res["status"]["rlimits"] is True
    assert res[f"write_bytes {1 << 16}"] == "ok"
    assert res[f"write_bytes {(1 << 16) + 1}"] == "EFBIG"


def test_spec_errors_apply_nothing():
    """A malformed or misspelt spec is refused before anything is applied
    (checked in this very process, which therefore stays unsandboxed)."""
    for spec, code in (('{"wirte": ["/tmp"]}', "KR_EINVAL"), ('{"read": ["relative"]}', "KR_EINVAL"),
                       ('{"exec": "yes"}', "KR_EINVAL"), ('{"cpu_seconds": -1}', "KR_EINVAL"),
                       ('{"file_bytes": "1G"}', "KR_EINVAL"), ('{"gpu_shm": "no"}', "KR_EINVAL"),
                       ('{"gpu_task_read": 0}', "KR_EINVAL"),
                       ('{"read": [', "KR_EPARSE"), ('[]', "KR_EINVAL")):
        with pytest.raises(kreward.KrewardError) as e:
            sandbox.enter_json(spec)
        assert code in str(e.value) or e.value.code == getattr(kreward.Status, code[3:], None), (spec, e.value)
    with open("/etc/hostname" if os.path.exists("/etc/hostname") else "/etc/passwd") as f:
        f.read(1)  # still unsandboxed


@needs_landlock
def test_gpu_grants_narrowed_by_spec(trees):
    """"gpu": true grants /dev/shm and the task folder's files; "gpu_shm":
    false leaves /dev/shm out, "gpu_task_read": false the task files' read
    right, each on its own (what CUDA needs of them is measured with
    scripts/sandbox_cuda_probe.py on a GPU)."""
    r, w, _ = trees
    if not os.access("/dev/shm", os.W_OK):
        pytest.skip("/dev/shm not writable here")
    other = f"/dev/shm/kr-enter-other-{os.getpid()}"
    new = f"/dev/shm/kr-enter-new-{os.getpid()}"
    with open(other, "w") as f:
        f.write("the trainer's tensors")
    base = {"read": python_reads() + [str(r)], "write": [str(w)], "gpu": True}
    probes = [["read", other], ["write", new], ["read_task", "environ"]]
    got = {}
    try:
        for name, extra in (("wide", {}), ("no_shm", {"gpu_shm": False}),
                            ("no_task_read", {"gpu_task_read": False})):
            got[name] = run_child({**base, **extra}, probes)
            if os.path.exists(new):
                os.unlink(new)
    finally:
        os.unlink(other)
    wide, no_shm, no_task = got["wide"], got["no_shm"], got["no_task_read"]
    # the grant's known exposures (docs/sandbox.md), then each closed alone
    assert wide[f"read {other}"] == "ok" and wide[f"write {new}"] == "ok"
    assert wide["read_task environ"] == "ok"
    assert no_shm[f"read {other}"] == "EACCES" and no_shm[f"write {new}"] == "EACCES"
    assert no_shm["read_task environ"] == "ok"
    assert no_task["read_task environ"] == "EACCES"
    assert no_task[f"read {other}"] == "ok"


ISOLATE_CHILD = textwrap.dedent("""
    import json, os, sys
    from kreward import sandbox
    other = int(sys.argv[1])
    status = sandbox.isolate()
    out = {"status": status}
    def refused(f, *a):
        try:
            f(*a)
            return False
        except PermissionError:
            return True
    out["kill other"] = refused(os.kill, other, 0)
    out["kill parent"] = refused(os.kill, os.getppid(), 0)
    out["renice other"] = refused(os.setpriority, os.PRIO_PROCESS, other, 5)
    out["pin other"] = refused(os.sched_setaffinity, other, os.sched_getaffinity(0))
    out["kill self"] = not refused(os.kill, os.getpid(), 0)
    out["pin self"] = not refused(os.sched_setaffinity, 0, os.sched_getaffinity(0))
    print(json.dumps(out))
""")


@needs_seccomp
def test_isolate_from_python_refuses_other_processes():
    """kreward.sandbox.isolate (kr_sandbox_isolate), the filter a ModelNew
    worker enters before its candidate: another process of the same user
    cannot be signalled, reniced or pinned from inside; the process's own
    calls still work."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings" / "python"))
        r = subprocess.run([sys.executable, "-c", ISOLATE_CHILD, str(other.pid)], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout.splitlines()[-1])
        assert out.pop("status") == {"applied": True}
        assert all(out.values()), out
        assert other.poll() is None  # nothing reached it
    finally:
        other.kill()
        other.wait()
