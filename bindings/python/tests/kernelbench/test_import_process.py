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
