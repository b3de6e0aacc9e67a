"""A problem given as a path travels self-contained (kreward/problem_spec.py):
its reference and fast kernel inlined, read again when either changes."""
import json
import os

from kreward.problem_spec import portable


def test_both_sources_inlined_and_read_again_when_one_changes(tmp_path):
    (tmp_path / "ref.cu").write_text("// the reference\n")
    (tmp_path / "fast.cu").write_text("// fast, first\n")
    (tmp_path / "problem.json").write_text(json.dumps({
        "name": "p", "dims": ["N"], "cases": [{"N": 4}],
        "tensors": [{"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"}],
        "reference": {"source": "ref.cu", "fast": {"source": "fast.cu"}}}))
    d = portable(str(tmp_path))
    assert d["reference"] == {"cuda": "// the reference\n", "fast": {"cuda": "// fast, first\n"}}
    assert portable(str(tmp_path)) is d  # unchanged: the cached spec
    (tmp_path / "fast.cu").write_text("// fast, second\n")
    st = os.stat(tmp_path / "fast.cu")
    os.utime(tmp_path / "fast.cu", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    again = portable(str(tmp_path))
    assert again["reference"]["fast"] == {"cuda": "// fast, second\n"}
    assert "source" not in again["reference"]
