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

device_build() {
  { [ -f "$1/build.ninja" ] || meson setup "$1" -Dbuildtype=release >/dev/null; } &&
    ninja -C "$1" >/dev/null || { echo "BUILD FAILED"; return 1; }
}
