"""The binding against the C ABI: struct layouts as pinned by the C ABI
test, every public function declared, an errcheck on every status, and a
clear error for a library of another ABI."""
import ctypes
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from kreward import _lib

STRUCTS = {"kr_context_options": _lib.ContextOptions, "kr_compile_options": _lib.CompileOptions,
           "kr_verify_options": _lib.VerifyOptions, "kr_bench_options": _lib.BenchOptions,
           "kr_baseline": _lib.Baseline, "kr_evaluate_options": _lib.EvaluateOptions,
           "kr_golden_request": _lib.GoldenRequest, "kr_term_def": _lib.TermDef,
           "kr_pool_options": _lib.PoolOptions, "kr_job": _lib.Job}
# KR_API functions returning int that are not a kr_status
NOT_STATUS = {"kr_context_has_device", "kr_problem_tensor_dtype", "kr_problem_tensor_role",
              "kr_problem_reference_kind", "kr_program_cache_result", "kr_report_verdict",
              "kr_verdict_from_name", "kr_report_term_counted"}


def pins():
    text = (ROOT / "tests" / "abi" / "test_struct_sizes.c").read_text()
    sizes = re.findall(r"PIN\(sizeof\((\w+)\), (\d+)\)", text)
    offsets = re.findall(r"PIN\(offsetof\((\w+), (\w+)\), (\d+)\)", text)
    return sizes, offsets


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="pins are for LP64")
def test_struct_layouts_match_the_c_pins():
    sizes, offsets = pins()
    checked = set()
    for struct, size in sizes:
        if struct in STRUCTS:
            assert ctypes.sizeof(STRUCTS[struct]) == int(size), struct
            checked.add(struct)
    for struct, field, offset in offsets:
        if struct in STRUCTS:
            assert getattr(STRUCTS[struct], field).offset == int(offset), (struct, field)
    assert checked == set(STRUCTS)


@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
def test_struct_layouts_match_the_c_compiler(tmp_path):
    """Every struct the binding declares, field by field, against sizeof and
    offsetof as a C compiler sees the public headers."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <kreward/kreward.h>",
             "int main(void) {"]
    for struct, cls in STRUCTS.items():
        lines.append(f'printf("{struct} sizeof %zu\\n", sizeof({struct}));')
        for field, _ in cls._fields_:
            lines.append(f'printf("{struct} {field} %zu\\n", offsetof({struct}, {field}));')
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c11", "-I", str(ROOT / "include"), "-o", str(exe), str(src)],
                   check=True)
    seen = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        struct, field, value = line.split()
        seen[(struct, field)] = int(value)
    for struct, cls in STRUCTS.items():
        assert ctypes.sizeof(cls) == seen[(struct, "sizeof")], struct
        for field, _ in cls._fields_:
            assert getattr(cls, field).offset == seen[(struct, field)], (struct, field)


def public_functions():
    """{name: return type} of every KR_API function in the headers."""
    return {name: ret for name, (ret, params) in prototypes().items()}


def prototypes():
    """{name: (return type, [parameter declarations])} from the headers."""
    found = {}
    for header in (ROOT / "include" / "kreward").rglob("*.h"):  # sys/ too
        text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
        for m in re.finditer(r"KR_API\s+([\w\s\*]+?)\s*\**\s*(kr_\w+)\s*\(", text):
            depth, i = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            params, depth, cur = [], 0, ""
            for ch in text[m.end():i - 1]:
                depth += {"(": 1, ")": -1}.get(ch, 0)
                if ch == "," and depth == 0:
                    params.append(cur.strip())
                    cur = ""
                else:
                    cur += ch
            params.append(cur.strip())
            found[m.group(2)] = (m.group(1).strip(), [] if params == ["void"] else params)
    return found


SCALARS = {"int": ctypes.c_int, "size_t": ctypes.c_size_t, "uint64_t": ctypes.c_uint64,
           "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64, "double": ctypes.c_double}
STRUCT_ARGS = {"kr_" + n: t for n, t in (("context_options", _lib.ContextOptions),
                                          ("compile_options", _lib.CompileOptions),
                                          ("verify_options", _lib.VerifyOptions),
                                          ("bench_options", _lib.BenchOptions),
                                          ("baseline", _lib.Baseline),
                                          ("evaluate_options", _lib.EvaluateOptions),
                                          ("term_def", _lib.TermDef),
                                          ("pool_options", _lib.PoolOptions),
                                          ("job", _lib.Job))}


def expected_ctype(param):
    """The ctypes type a C parameter declaration is bound with."""
    if "(*" in param:
        return _lib.USER_DESTROY
    if param.startswith("kr_golden_fn"):
        return _lib.GOLDEN_FN
    decl = re.sub(r"\bconst\b", "", param)
    base = decl.split("*")[0].split()[0]
    stars = decl.count("*")
    if stars == 0:
        return SCALARS[base]
    if stars == 2:  # an out pointer to a handle, a string or an image
        return ctypes.POINTER(ctypes.c_void_p)
    if base == "char":
        return ctypes.c_char_p
    if base in SCALARS:
        return ctypes.POINTER(SCALARS[base])
    if base in STRUCT_ARGS:
        return ctypes.POINTER(STRUCT_ARGS[base])
    return ctypes.c_void_p  # a handle or a buffer


def test_argument_types_follow_the_prototypes():
    table = {name: args for name, args, res, check in _lib._FUNCTIONS}
    for name, (ret, params) in prototypes().items():
        assert table[name] == [expected_ctype(p) for p in params], name


def test_every_public_function_is_declared_with_an_errcheck_on_statuses():
    table = {name: (args, res, check) for name, args, res, check in _lib._FUNCTIONS}
    public = public_functions()
    assert len(public) > 90
    assert set(public) == set(table)
    for name, ret in public.items():
        args, res, check = table[name]
        if ret == "int" and name not in NOT_STATUS:
            assert res is ctypes.c_int and check is not None, name
            assert getattr(_lib.fn, name[3:]).errcheck is check
        else:
            assert check is None, name


@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
def test_library_of_another_abi_is_refused(tmp_path):
    src = tmp_path / "old.c"
    src.write_text("unsigned kr_abi_version(void) { return 0; }\n")
    so = tmp_path / "libkreward.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    env = {"KREWARD_LIBRARY": str(so), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(ROOT / "bindings" / "python")}
    out = subprocess.run([sys.executable, "-c", "import kreward"], capture_output=True, text=True,
                         env=env)
    assert out.returncode != 0
    assert "has ABI version 0; this binding needs 1" in out.stderr
