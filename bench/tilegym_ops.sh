#!/usr/bin/env bash
# TileGym's own tests of ops tileport delivers as its cutile-rs backend: the build
# machine's half.
#
#   bash bench/tilegym_ops.sh TILEGYM LAUNCHES WORK OP...
#
# Copies the unmodified TileGym checkout TILEGYM to WORK/tilegym as a git checkout,
# runs `tileport tilegym add OP` for each OP (with LAUNCHES/launches.jsonl and the
# files in $EXTRA_LAUNCHES, space-separated; committing each op's change, as a
# maintainer would before adding the next; WORK/<op>.patch is the patch, WORK/add.tsv
# the exit code of each), checks that the patches of the added ops, together, apply
# to a fresh copy (`git apply --check`), builds the crate (`tileport tilegym build`)
# and packs WORK/tilegym-tests.tar.xz: the patched src/ and tests/ with the library.
# WORK/lines.md: the lines each added op brings (bench/tilegym_lines.sh).
# On the GPU host: tar -xJf tilegym-tests.tar.xz -C DIR &&
#   python3 -m nodes.tilegym_backend.test_run --tilegym DIR/tilegym --no-build --out OUT
set -euo pipefail

if [ $# -lt 4 ]; then
    sed -n '2,18p' "$0" >&2
    exit 2
fi
tilegym=$1 launches=$2 work=$3
shift 3
mkdir -p "$work"
work=$(cd "$work" && pwd)
checkout=$work/tilegym
git_() { git -C "$checkout" -c user.name=tileport -c user.email=tileport@localhost "$@"; }

rm -rf "$checkout" "$work/fresh"
cp -r "$tilegym" "$checkout"
git_ init -q && git_ add -A && git_ commit -qm "TileGym as it is"
base=$(git_ rev-parse HEAD)
extra=()
for file in ${EXTRA_LAUNCHES:-}; do
    extra+=(--launches "$file")
done

: > "$work/add.tsv"
for op in "$@"; do
    set +e
    tileport tilegym add "$op" --tilegym "$checkout" --launches "$launches/launches.jsonl" \
        "${extra[@]}" --work "$work/ports" > "$work/$op.patch" 2> "$work/$op.log"
    code=$?
    set -e
    printf '%s\t%s\n' "$op" "$code" >> "$work/add.tsv"
    if [ "$code" -eq 0 ]; then
        git_ add -A && git_ commit -qm "cutile-rs $op (tileport)"
    fi
    tail -1 "$work/$op.log"
done

# Every added op's change at once, against the unmodified tree.
cp -r "$tilegym" "$work/fresh"
git -C "$work/fresh" init -q
git_ diff "$base" HEAD > "$work/all-ops.patch"
git -C "$work/fresh" apply --check "$work/all-ops.patch"
echo "all-ops.patch applies to a fresh copy"
rm -rf "$work/fresh"
bash "$(dirname "$0")/tilegym_lines.sh" "$work" | tee "$work/lines.md"

tileport tilegym build --tilegym "$checkout" --log "$work/cargo-build.log"
tar -cJf "$work/tilegym-tests.tar.xz" -C "$work" \
    tilegym/src tilegym/tests tilegym/pyproject.toml tilegym/pytest.ini
ls -l "$work/tilegym-tests.tar.xz"
