import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
# KREWARD_TEST_INSTALLED=1 (scripts/wheel-test.sh): test the kreward package
# installed in this Python (a wheel), not the tree's sources and build
INSTALLED = os.environ.get("KREWARD_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, str(ROOT / "bindings" / "python"))
# tests run against the build tree unless told otherwise
if "KREWARD_LIBRARY" not in os.environ and not INSTALLED:
    for build in ("build", "build-asan"):
        lib = ROOT / build / "lib" / "libkreward.so.1"
        if lib.exists():
            os.environ["KREWARD_LIBRARY"] = str(lib)
            break

import kreward  # noqa: E402

if INSTALLED:
    if pathlib.Path(kreward.__file__).resolve().is_relative_to(ROOT):
        raise RuntimeError(f"KREWARD_TEST_INSTALLED=1 but kreward comes from the tree "
                           f"({kreward.__file__}): install the wheel into this Python")
    # the package found its own library (tests/wheel/check_installed.py
    # checks where); tests that run the tree's sources in a subprocess
    # (PYTHONPATH=bindings/python) get the same one
    os.environ.setdefault("KREWARD_LIBRARY", kreward._lib.path)

EXAMPLES = ROOT / "examples" / "problems"


def has_gpu():
    with kreward.Context() as ctx:
        return ctx.has_device


def pytest_collection_modifyitems(config, items):
    if config.getoption("-m") and "gpu" in config.getoption("-m"):
        if not has_gpu():
            skip = pytest.mark.skip(reason="no usable NVIDIA GPU")
            for item in items:
                if "gpu" in item.keywords:
                    item.add_marker(skip)
        return
    skip = pytest.mark.skip(reason="GPU test: run with -m gpu on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def ctx():
    with kreward.Context(no_device=True) as c:
        yield c


@pytest.fixture
def vadd():
    return str(EXAMPLES / "l1_vector_add" / "problem.json")


@pytest.fixture
def vadd_fast():
    return (EXAMPLES / "l1_vector_add" / "candidates" / "fast.cu").read_text()
