#!/usr/bin/env bash
# Lines of the cutile-rs backend each op added, as a markdown table.
#
#   bash bench/tilegym_lines.sh WORK
#
# WORK is bench/tilegym_ops.sh's directory: for each WORK/<op>.patch of an op
# added there (exit 0 in WORK/add.tsv), the files the patch creates for that op
# under ops/cutile_rs/ (its kernels' kernel.rs and ffi.rs, its Python wrapper),
# counted in the patched checkout WORK/tilegym. Files shared by every op (the
# crate's lib.rs, ffi_util.rs, tileport's hand-written tileport_*.{rs,py,cpp} that
# the first op brings, __init__.py) are left out.
set -euo pipefail

if [ $# -ne 1 ]; then
    sed -n '2,10p' "$0" >&2
    exit 2
fi
work=$1

echo "| op | kernel.rs | ffi.rs | wrapper | total |"
echo "|---|---:|---:|---:|---:|"
while IFS=$'\t' read -r op code; do
    [ "$code" = 0 ] || continue
    kernel=0 ffi=0 wrapper=0
    while read -r path; do
        lines=$(wc -l < "$work/tilegym/$path")
        case $path in
            */"${op}_kernel"/kernel.rs) kernel=$((kernel + lines)) ;;
            */"${op}_kernel"/ffi.rs) ffi=$((ffi + lines)) ;;
            */cutile_rs/"$op".py) wrapper=$((wrapper + lines)) ;;
        esac
    done < <(awk '/^diff --git/ { path = substr($4, 3) }
                  /^new file mode/ && path ~ /ops\/cutile_rs\// { print path }' "$work/$op.patch")
    echo "| $op | $kernel | $ffi | $wrapper | $((kernel + ffi + wrapper)) |"
done < "$work/add.tsv"
