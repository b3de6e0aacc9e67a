# shellcheck shell=bash
# Sourced by the one-call GPU scripts (gpu-pool.sh, gpu-kernelbench.sh): the
# Debian -dev packages carried in .device/debs (../shared/device/README.md)
# unpacked into a private sysroot that pkg-config and the loader are pointed
# at, and `device_build DIR`, which configures (once) and builds the tree
# there, printing BUILD FAILED and returning non-zero when it does not build.
S=/tmp/sysroot
mkdir -p $S
for f in .device/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" $S; done
export PKG_CONFIG_PATH=$S/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=$S
export LD_LIBRARY_PATH=$S/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}

# A call's clock for the one-call scripts: seconds since t0; `limit N`: N,
# or what is left of $total less 10 s if that is less; `want STEP`: STEP is
# one of $steps (" a b c ", set by the script)
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
limit() { local left=$(( total - $(elapsed) - 10 )); echo $(( left < $1 ? (left > 1 ? left : 1) : $1 )); }
want() { [[ "$steps" == *" $1 "* ]]; }

device_build() {
  { [ -f "$1/build.ninja" ] || meson setup "$1" -Dbuildtype=release >/dev/null; } &&
    ninja -C "$1" >/dev/null || { echo "BUILD FAILED"; return 1; }
}
