#!/usr/bin/env bash
# TileGym's tests of the added ops, then the sweep through tilegym.ops: the GPU
# host's half of bench/tilegym_ops.sh.
#
#   bash bench/tilegym_gpu.sh PACK OUT [SWEEP OPTION...]
#
# Unpacks PACK (the tilegym-tests.tar.xz bench/tilegym_ops.sh made: the patched
# src/ and tests/ with the library built on the build machine), runs the wrappers'
# test (the compiled launch built and checked against the Python packer, into
# OUT/launch-test.txt), `nodes.tilegym_backend.test_run --no-build` (TileGym's test
# file of every added op, backend cutile-rs) and `nodes.tilegym_backend.sweep` with
# the options given (say `--calls 100 --budget-s 400`), both writing into OUT. Needs
# the CUDA Tile toolchain 13.4 (tileiras with its own ptxas and libnvvm) on PATH.
set -uo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi
pack=$1 out=$2
shift 2
mkdir -p "$out"
work=$(mktemp -d)
tar -xJf "$pack" -C "$work"
TILEPORT_TILEGYM="$work/tilegym" python3 -m pytest -q -p no:cacheprovider \
    tests/tilegym/test_tilegym_wrapper.py > "$out/launch-test.txt" 2>&1
launch=$?
python3 -m nodes.tilegym_backend.test_run --tilegym "$work/tilegym" --no-build \
    --out "$out" --timeout 300
tests=$?
python3 -m nodes.tilegym_backend.sweep --tilegym "$work/tilegym" --out "$out" "$@"
sweep=$?
echo "launch test exit $launch, tests exit $tests, sweep exit $sweep"
[ "$launch" -eq 0 ] && [ "$tests" -eq 0 ] && [ "$sweep" -eq 0 ]
