"""Problem names (kreward.serve.problems): every problem file is registered
under its directory's name and its own, and one_name_each keeps one name
per file, so the environments (OpenEnv, Verifiers) draw and list each
problem once."""
import pathlib

from kreward.serve.problems import one_name_each, scan

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples" / "problems"


def test_one_name_per_problem_file():
    paths = scan([str(EXAMPLES)])
    files = sorted(str(p.resolve()) for p in EXAMPLES.glob("*/problem.json"))
    one = one_name_each(paths)
    assert len(paths) > len(files)  # the double registration this is for
    assert sorted(paths[n] for n in one) == files  # each file once
    own = [n for n in one if n != pathlib.Path(paths[n]).parent.name]
    assert own  # their own names where they have one
