#!/usr/bin/env bash
# A committed tree for the GPU machine: HEAD exported into .snap/ (ignored
# by git) with the carried Debian packages and the commit recorded, so a GPU
# run tests exactly a commit while the working tree keeps changing.
# Carry `.snap` and run `cd .snap && bash scripts/gpu-check.sh` there.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.snap/' .git/info/exclude 2>/dev/null || echo '/.snap/' >> .git/info/exclude
rm -rf .snap && mkdir -p .snap
git archive HEAD | tar -x -C .snap
cp -r .device .snap/.device 2>/dev/null || mkdir -p .snap/.device
git rev-parse --short HEAD > .snap/.device/commit
# pure-Python wheels the GPU image lacks (gpu-check.sh installs them)
[ -d .wheels ] && cp -r .wheels .snap/.wheels
# upstream KernelBench problems for gpu-kernelbench.sh's "upstream" step:
# KR_SNAP_UPSTREAM=<a KernelBench checkout's KernelBench/ folder> copies its
# level1-3 into .snap/upstream (files not ours: never committed)
if [ -n "${KR_SNAP_UPSTREAM:-}" ]; then
  mkdir -p .snap/upstream
  for l in level1 level2 level3; do cp -r "$KR_SNAP_UPSTREAM/$l" .snap/upstream/; done
fi
# an earlier vetting run's log, for gpu-round.sh's vetcorpus step to resume:
# KR_SNAP_VET_RESUME=<a vet.jsonl brought back>
if [ -n "${KR_SNAP_VET_RESUME:-}" ]; then
  mkdir -p .snap/vet-resume && cp "$KR_SNAP_VET_RESUME" .snap/vet-resume/vet.jsonl
fi
# KernelBench imports made ahead (kernelbench/import_cache.py, by content), so
# the vetcorpus step measures instead of probing on the GPU machine's time:
# KR_SNAP_IMPORT_CACHE=<a folder of KREWARD_IMPORT_CACHE> copies it to .snap/import-cache
if [ -n "${KR_SNAP_IMPORT_CACHE:-}" ]; then
  mkdir -p .snap/import-cache && cp "$KR_SNAP_IMPORT_CACHE"/*.json .snap/import-cache/
fi
# the tree before the reward-integrity defences, for bench/bench_defence_cost.py
# (KR_SNAP_OLD=0 leaves it out)
if [ "${KR_SNAP_OLD:-1}" != 0 ] && git cat-file -e 324416e 2>/dev/null; then
  mkdir -p .snap/old && git archive 324416e | tar -x -C .snap/old
fi
du -sh .snap | cut -f1
