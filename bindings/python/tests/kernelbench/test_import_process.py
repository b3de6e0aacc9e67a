"""An import runs the problem file in one process (kernelbench/
import_process.py) for its probes and its soundness check; a probe that
kills the process costs only that process: the next request starts a
fresh one, and the import goes on with what it could not learn noted."""
import pytest

torch = pytest.importorskip("torch", reason="the KernelBench importer needs torch (CPU is enough)")

from kreward.kernelbench import import_problem, importer  # noqa: E402

HEAD = ("import os\nimport torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * 2\nB = 64\ndef get_init_inputs():\n    return []\n")


def _counting(monkeypatch):
    started = []
    start = importer.ImportProcess._start

    def counted(self):
        started.append(self.path)
        return start(self)

    monkeypatch.setattr(importer.ImportProcess, "_start", counted)
    return started


def test_an_import_starts_one_process(tmp_path, monkeypatch):
    started = _counting(monkeypatch)
    (tmp_path / "f.py").write_text(HEAD + "def get_inputs():\n    return [torch.randn(B, 32)]\n")
    imp = import_problem(str(tmp_path / "f.py"), cache_dir=None)
    assert [c[0] for c in imp.cases] == ["base", "small", "odd"]
    assert imp.soundness.get("error") is None and imp.soundness["cases"]
    assert len(started) == 1


def test_a_process_that_dies_is_started_again(tmp_path, monkeypatch):
    """get_inputs exits the process whenever it runs on the CPU: the value
    probe and the determinism check fail, each in a process of its own;
    the soundness check (the library's inputs) runs in a third."""
    started = _counting(monkeypatch)
    (tmp_path / "f.py").write_text(
        HEAD + "def get_inputs():\n    x = torch.randn(B, 32)\n"
        "    if x.device.type == 'cpu':\n        os._exit(3)\n    return [x]\n")
    imp = import_problem(str(tmp_path / "f.py"), cache_dir=None)
    notes = " ".join(imp.notes)
    assert "no value statistics" in notes and "exited 3" in notes
    assert imp.soundness.get("error") is None
    assert len(started) == 3


def test_the_process_is_forked_from_the_zygote_and_answers_as_one_started(tmp_path):
    """With the caller's zygote (torch imported there) the import process
    is forked, not started: the same answers as a started one, and its
    exit status still read (the forked parent that waits for it writes it)."""
    from kreward.kernelbench.import_process import ImportProcess, _ForkedImport
    (tmp_path / "f.py").write_text(HEAD + "def get_inputs():\n    return [torch.randn(B, 32)]\n")
    req = [{"overrides": {}, "real": False, "determinism": True}]
    answers = {}
    for zygote in (True, False):
        proc = ImportProcess(str(tmp_path / "f.py"), zygote=zygote)
        try:
            (answers[zygote],) = proc.probes(req, 120)
            assert isinstance(proc.proc, _ForkedImport) is zygote, proc.zygote_why
            proc.proc.stdin.close()  # its loop ends: it exits 0
            assert proc.proc.wait(30) == 0
        finally:
            proc.close()
    assert answers[True]["ok"] and answers[True]["deterministic"] is True
    for k in ("constants", "inputs", "outputs", "modules", "deterministic"):
        assert answers[True].get(k) == answers[False].get(k), k


def _sleepers(mark):
    import os
    found = []
    for n in os.listdir("/proc"):
        try:
            with open(f"/proc/{n}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", mark.encode()]:
                    found.append(n)
        except OSError:
            pass
    return found


def _gone(mark, within_s=5):
    import time
    deadline = time.time() + within_s
    while _sleepers(mark) and time.time() < deadline:
        time.sleep(0.05)
    return not _sleepers(mark)



def _starting_a_sleep(tmp_path, offset, rest):
    """A problem file that starts `sleep MARK` when imported, then rest (its
    get_inputs and anything else); (path, MARK)."""
    import os
    import time
    mark = f"{os.getpid() % 1000 + offset}.{int(time.time()) % 100000}"
    (tmp_path / "f.py").write_text(
        HEAD + "import subprocess\n"
        f"subprocess.Popen(['sleep', '{mark}'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL)\n" + rest)
    return str(tmp_path / "f.py"), mark

def test_a_forked_import_leaves_nothing_running(tmp_path):
    """close() ends the forked process's group: a program the file started
    (in its sandbox, programs are allowed) does not outlive it, and the
    import process itself is reaped by its waiting parent, not left a
    zombie to init."""
    import time
    from kreward.kernelbench.import_process import ImportProcess
    path, mark = _starting_a_sleep(tmp_path, 6000, "def get_inputs():\n    return [torch.randn(B, 32)]\n")
    proc = ImportProcess(path)
    try:
        (answer,) = proc.probes([{"overrides": {}, "real": False, "determinism": False}], 120)
        assert answer["ok"], answer
        assert _sleepers(mark)
        proc.proc._read(wait_s=5)
        child = proc.proc.child  # the import process itself (its waiting parent is proc.pid)
        assert child and child != proc.proc.pid
    finally:
        proc.close()

    def left(pid):  # still a process, or a zombie no one reaped (helper-38: one per import)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read()
        except OSError:
            return None
    deadline = time.time() + 5
    while left(child) and time.time() < deadline:
        time.sleep(0.05)
    assert _gone(mark)
    assert left(child) is None


def test_a_relative_pythonpath_reaches_the_forked_process_absolute(tmp_path, monkeypatch):
    """$PYTHONPATH may name the package relatively (the GPU machine's
    recipe does): a started process's site made its entries absolute, the
    forked one must too, or its sandbox's spec (absolute paths only)
    refused every import there (b0dfbc0's first GPU call)."""
    import pathlib
    from kreward.kernelbench.import_process import ImportProcess, _ForkedImport
    package = pathlib.Path(importer.__file__).resolve().parents[2]  # bindings/python
    monkeypatch.chdir(package.parent)
    monkeypatch.setenv("PYTHONPATH", package.name)  # "python", relative to bindings/
    (tmp_path / "f.py").write_text(HEAD + "def get_inputs():\n    return [torch.randn(B, 32)]\n")
    proc = ImportProcess(str(tmp_path / "f.py"))
    try:
        (answer,) = proc.probes([{"overrides": {}, "real": False, "determinism": False}], 120)
        assert isinstance(proc.proc, _ForkedImport), proc.zygote_why
        assert answer["ok"], answer
    finally:
        proc.close()


def test_a_program_the_file_started_dies_with_an_import_process_that_exited(tmp_path):
    """The import process dies on its own (the file exits it): what the file
    started goes too, killed by the forked parent once it has reaped it
    (helper-39: it survived, with or without the zygote)."""
    from kreward.kernelbench.import_process import ImportProcess
    path, mark = _starting_a_sleep(tmp_path, 7000, "def get_inputs():\n    os._exit(3)\n")
    proc = ImportProcess(path)
    try:
        (answer,) = proc.probes([{"overrides": {}, "real": False, "determinism": False}], 120)
        assert not answer["ok"] and "exited 3" in answer["error"], answer
        assert proc.zygote_why is None  # (it was forked)
        assert _gone(mark)
    finally:
        proc.close()


def test_close_during_a_request_ends_the_import_at_once(tmp_path):
    """close() while the file is still being imported (it sleeps there):
    the forked parent kills its child's group, whatever the child has
    written so far (helper-39: a close within a second of a request left
    the import process running, and close() waited for it)."""
    import json
    import time
    from kreward.kernelbench.import_process import ImportProcess, _ForkedImport
    path, mark = _starting_a_sleep(tmp_path, 8000, "import time\ntime.sleep(120)\n"
                                   "def get_inputs():\n    return [torch.randn(B, 32)]\n")
    proc = ImportProcess(path)
    proc._start()
    assert isinstance(proc.proc, _ForkedImport), proc.zygote_why
    proc.proc.stdin.write(json.dumps({"probes": [{"overrides": {}, "real": False, "determinism": False}]})
                          + "\n")
    proc.proc.stdin.flush()
    deadline = time.time() + 30
    while not _sleepers(mark) and time.time() < deadline:
        time.sleep(0.05)
    assert _sleepers(mark)  # the file is being imported
    t0 = time.time()
    proc.close()
    assert time.time() - t0 < 10
    assert _gone(mark)
