#!/usr/bin/env bash
# Records TileGym's cuTile launches on a GPU host: one `tileport capture` per op
# test file (CAPTURE_JOBS at once, each bounded by its own timeout), then one
# merged launch file, each distinct launch once, in the order of the list below.
#
#   bash bench/captures/capture-tilegym.sh TILEGYM_DIR OUT_DIR
#
# CAPTURE_FILES replaces the list (one "FILE SECONDS [TERM]" per line).
# Writes OUT_DIR/launches.jsonl, OUT_DIR/summaries.jsonl (one capture summary per
# test file: the file, its timeout, its exit status and what it recorded) and
# OUT_DIR/logs.txt (the end of each file's pytest output).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tilegym=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
work=$(mktemp -d)
export PYTHONPATH="$repo:$tilegym/src${PYTHONPATH:+:$PYTHONPATH}"
export TILEGYM_DISABLE_AUTOTUNE=1 PYTHONUNBUFFERED=1
export FILES CAPTURE_REPO=$repo CAPTURE_TILEGYM=$tilegym CAPTURE_WORK=$work
# test file under tests/ops | seconds at most | optional extra -k term; CAPTURE_FILES
# (lines of the same form) replaces the list.
FILES=${CAPTURE_FILES:-"
test_bmm.py 200 cutile-False
test_matmul.py 200
test_group_gemm.py 200
test_bmm.py 180 cutile-True
test_recurrent_gated_delta_rule.py 150
test_moe.py 150
test_chunk_gated_delta_rule.py 120
test_rms_norm.py 150
test_silu_and_mul.py 150
test_softmax.py 150
test_rope.py 150
test_attention_sink.py 150
test_splitk_reduce.py 150
test_flash_decode.py 150
test_mla_decoding.py 150
test_dropout.py 150
test_layer_norm_legacy.py 150
activation/test_relu.py 150
experimental/test_nvfp4_quantize.py 150
test_mla_decoding_split_kv.py 150
activation/test_geglu.py 150
activation/test_gelu.py 150
experimental/test_mhc.py 150
experimental/test_swa_attention.py 150
experimental/test_fused_linear_cross_entropy.py 150
"}
# Every capture ends by the deadline (CAPTURE_BUDGET_S from now, 420 by default).
export CAPTURE_DEADLINE=$(($(date +%s) + ${CAPTURE_BUDGET_S:-420}))
one() {
  local file=$1 seconds=$2 term=${3:-} name
  name=$(echo "$file${term:+-$term}" | tr '/' '_' | sed 's/\.py//')
  local left=$((CAPTURE_DEADLINE - $(date +%s) - 15))
  ((left < seconds)) && seconds=$left
  if ((seconds < 20)); then
    echo "$file ${term:--} 0 skipped 0" >>"$CAPTURE_WORK/done.txt"
    return
  fi
  local started=$SECONDS
  (cd "$CAPTURE_TILEGYM" && python3 -m app.cli_capture --out "$CAPTURE_WORK/$name.jsonl" --json -- \
    timeout -k 10 "$seconds" python3 -m pytest "tests/ops/$file" -q \
    -k "cutile and not perf${term:+ and $term}" -p no:cacheprovider) >"$CAPTURE_WORK/$name.out" 2>&1
  local code=$?
  echo "$file ${term:--} $seconds $code $((SECONDS - started))" >>"$CAPTURE_WORK/done.txt"
  echo "$file${term:+ ($term)}: exit $code after $((SECONDS - started)) s (limit $seconds s)"
}
export -f one
echo "$FILES" | grep . | xargs -P "${CAPTURE_JOBS:-8}" -L 1 bash -c 'one "$@"' _
python3 - "$out" <<'PY'
import json, os, sys
from pathlib import Path
sys.path.insert(0, os.environ["CAPTURE_REPO"])
from schemas.launch_capture import parse_launch_record

work, out = Path(os.environ["CAPTURE_WORK"]), Path(sys.argv[1])
done = [line.split() for line in (work / "done.txt").read_text().splitlines()]
order = [f"{w[0]} {w[2] if len(w) > 2 else '-'}" for w in (l.split() for l in os.environ["FILES"].splitlines() if l.strip())]
seen, lines, summaries, logs = set(), [], [], []
for file, term, seconds, code, wall in sorted(done, key=lambda d: order.index(f"{d[0]} {d[1]}")):
    label = f"tests/ops/{file}" + ("" if term == "-" else f" -k {term}")
    name = (file + ("" if term == "-" else f"-{term}")).replace("/", "_").replace(".py", "")
    out_path = work / f"{name}.out"
    text = out_path.read_text(errors="replace").splitlines() if out_path.exists() else []
    summary = {}
    for candidate in reversed(text):
        if candidate.startswith("{") and '"distinct_launches"' in candidate:
            summary = json.loads(candidate)
            break
    new_here = 0
    path = work / f"{name}.jsonl"
    for raw in path.read_text().splitlines() if path.exists() else []:
        identity = parse_launch_record(raw).identity()
        if identity not in seen:
            seen.add(identity)
            lines.append(raw)
            new_here += 1
    summary.pop("out", None)
    summaries.append({"selection": label, "timeout_s": int(seconds), "exit": int(code) if code.isdigit() else code,
                      "wall_s": int(wall), "new_in_merge": new_here, **summary})
    logs.append(f"==== {label} (exit {code}, {wall} s)\n" + "\n".join(text[-25:]))
(out / "launches.jsonl").write_text("".join(line + "\n" for line in lines))
(out / "summaries.jsonl").write_text("".join(json.dumps(s) + "\n" for s in summaries))
(out / "logs.txt").write_text("\n".join(logs) + "\n")
print(f"merged {len(lines)} launches from {len(summaries)} test files into {out}/launches.jsonl")
PY
