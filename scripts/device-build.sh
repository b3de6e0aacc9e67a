# shellcheck shell=bash
# Sourced by the GPU scripts (gpu-check.sh, gpu-round.sh, gpu-pool.sh,
# gpu-kernelbench.sh): the Debian -dev packages carried in .device/debs
# (../shared/device/README.md), where there are any, unpacked into a private
# sysroot that pkg-config and the loader are pointed at (a machine with the
# packages installed keeps its own); `device_build DIR`, which configures
# (once) and builds the tree there, printing BUILD FAILED and returning
# non-zero when it does not build; `device_wheels`.
S=/tmp/sysroot
if [ -d .device/debs ]; then
  mkdir -p $S
  for f in .device/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" $S; done
  export PKG_CONFIG_PATH=$S/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=$S
  export LD_LIBRARY_PATH=$S/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi

# A call's clock for the one-call scripts: seconds since t0; `limit N`: N,
# or what is left of $total less 10 s if that is less; `want STEP`: STEP is
# one of $steps (" a b c ", set by the script)
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
limit() { local left=$(( total - $(elapsed) - 10 )); echo $(( left < $1 ? (left > 1 ? left : 1) : $1 )); }
want() { [[ "$steps" == *" $1 "* ]]; }

# Pure-Python wheels the GPU image lacks (starlette, uvicorn: kreward serve)
# travel in .wheels/ (device-snapshot.sh copies it): installed under
# /tmp/pyext, put first on PYTHONPATH
device_wheels() {
  [ -d .wheels ] &&
    python3 -m pip install -q --no-index --no-deps --target /tmp/pyext .wheels/*.whl >/dev/null 2>&1 &&
    export PYTHONPATH=/tmp/pyext${PYTHONPATH:+:$PYTHONPATH}
}

device_build() {  # device_build BUILD_DIR [SOURCE_DIR]
  { [ -f "$1/build.ninja" ] || meson setup "$1" ${2:-} -Dbuildtype=release >/dev/null; } &&
    ninja -C "$1" >/dev/null || { echo "BUILD FAILED"; return 1; }
}
