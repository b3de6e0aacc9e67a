#!/usr/bin/env bash
# Records the commit (and whether the tree differs from it) in .device/commit,
# which travels to the GPU machine where there is no .git.
cd "$(dirname "$0")/.." && mkdir -p .device
c=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- . ':!.device' || c="$c+dirty"
echo "$c" > .device/commit && cat .device/commit
