"""The `kreward` command of the wheel: runs the CLI binary that the wheel
installs beside libkreward.so.1 (a console script cannot be a C program)."""
import os
import sys

# meson-python's folder for the wheel's native files (see _lib.py)
NATIVE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          ".kreward.mesonpy.libs")
BINARY = os.path.join(NATIVE_DIR, "kreward")


def main():
    if not os.access(BINARY, os.X_OK):
        sys.stderr.write(f"kreward: the CLI binary is not installed ({BINARY}): this kreward "
                         "package was installed without the native build (pip install the "
                         "repository's root, not bindings/python)\n")
        return 4  # the CLI's exit code for an environment failure (docs/cli.md)
    os.execv(BINARY, [BINARY] + sys.argv[1:])
    return 4  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
