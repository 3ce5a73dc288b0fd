#!/usr/bin/env bash
# What a first kernel check costs on a machine whose cache holds only the
# checkout's own release build (`make rust-build`): once with its target started
# from that build (toolchain.env.start_from_checkout_build), once from nothing.
#
#   bash bench/cold_kernel_check.sh KERNEL_RS
#
# KERNEL_RS: a kernel.rs the kernel writer wrote (its `port-kernel` output). Runs in
# a scratch cache (a copy of this checkout's release build); prints seconds per mode.
set -euo pipefail

if [ $# -ne 1 ]; then
    sed -n '2,10p' "$0" >&2
    exit 2
fi
kernel=$(realpath "$1")
cd "$(dirname "$0")/.."
source_target=$(.venv/bin/python -c 'from toolchain.env import cargo_target_dir; print(cargo_target_dir())')
kind=$(.venv/bin/python -c 'from toolchain.env import checkout_kind; print(checkout_kind())')
[ -d "$source_target/release" ] || { echo "no release build at $source_target: make rust-build" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/target-$kind"
cp -a "$source_target/release" "$scratch/target-$kind/release"
for mode in seeded cold; do
    rm -rf "$scratch/kernel-check-target-$kind"
    [ "$mode" = cold ] && mv "$scratch/target-$kind" "$scratch/off"
    SECONDS=0
    CARGO_TARGET_DIR="$scratch/target-$kind" TILEPORT_CACHE="$scratch" .venv/bin/python -c "
import sys
from pathlib import Path
from nodes.kernel_writer.rust_check import check_kernel_rs
check = check_kernel_rs(Path(sys.argv[1]))
sys.exit(0 if check.passed else check.log[-2000:])" "$kernel"
    echo "$mode: $SECONDS s"
    [ "$mode" = cold ] && mv "$scratch/off" "$scratch/target-$kind"
done
