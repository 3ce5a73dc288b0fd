#!/usr/bin/env bash
# The CPU half of the GPU proof on TileGym: port every recorded TileGym kernel
# through the whole pipeline up to the GPU boundary, then bundle the runs for one
# GPU job.
#
#   bash bench/tilegym_bundles.sh TILEGYM LAUNCHES WORK [KERNEL...]
#
# TILEGYM is an unmodified TileGym checkout, LAUNCHES its recorded launches folder
# (launches.jsonl, signatures.jsonl). Writes WORK/specs (tileport specs), one run
# directory per kernel under WORK/runs (tileport convert --no-gpu --time-all; a
# kernel converted by an earlier call is kept), WORK/convert.tsv (kernel, exit
# code, seconds; 4 is the expected one: awaiting a GPU), WORK/bundles (tileport
# gpu-bundle --runs of every run awaiting a GPU: one library, one bundle each) and
# WORK/bundles.tar.xz (the bundles and bench/run_bundles.py). With KERNEL names, only
# those are converted.
# On the GPU host: tar -xJf bundles.tar.xz && python3 bench/run_bundles.py bundles/* --out OUT
set -euo pipefail

if [ $# -lt 3 ]; then
    sed -n '2,16p' "$0" >&2
    exit 2
fi
tilegym=$1 launches=$2 work=$3
shift 3
mkdir -p "$work"
work=$(cd "$work" && pwd)

if [ ! -d "$work/specs" ]; then
    tileport specs "$launches/launches.jsonl" --source-root "$tilegym/src" \
        --signatures "$launches/signatures.jsonl" --out "$work/specs"
fi

kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
    for spec in "$work"/specs/*.port.yaml; do
        kernels+=("$(basename "$spec" .port.yaml)")
    done
fi

touch "$work/convert.tsv"
for kernel in "${kernels[@]}"; do
    if cut -f1 "$work/convert.tsv" | grep -qx "$kernel"; then
        continue
    fi
    start=$(date +%s)
    set +e
    tileport convert "$work/specs/$kernel.port.yaml" --out "$work/runs/$kernel" --no-gpu \
        --time-all > "$work/$kernel.log" 2>&1
    code=$?
    set -e
    printf '%s\t%s\t%s\n' "$kernel" "$code" "$(($(date +%s) - start))" | tee -a "$work/convert.tsv"
done

waiting=()
while IFS=$'\t' read -r kernel code _; do
    if [ "$code" = 4 ]; then
        waiting+=("$work/runs/$kernel")
    fi
done < "$work/convert.tsv"
tileport gpu-bundle --runs "${waiting[@]}" --out "$work/bundles" --time-all \
    --archive "$work/bundles.tar.xz"
du -h "$work/bundles.tar.xz"
