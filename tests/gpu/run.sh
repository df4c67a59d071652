#!/usr/bin/env bash
# Runs on the GPU machine, in one call: GPU tests, the unit tests, the tokenizer benchmark, and
# (with --golden) the Hugging Face golden data. Logs go to $OUT; a short table is printed last.
#   tests/gpu/run.sh --prebuilt .carry [--golden]
# .carry comes from tests/gpu/pack.sh (binaries built on the development machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cosmos-gpu-out}
mkdir -p "$OUT"
# $OUT brings back at most 8 files: per-test logs stay in $LOGS, $OUT gets tests.log, golden.log
# and golden/ (6 files).
LOGS=$(mktemp -d)
prebuilt="" golden=0 cpu7b=0 gpu7b=0 sanitize=0 bench7b=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --golden) golden=1; shift ;;
    --cpu-7b) cpu7b=1; shift ;;
    --gpu-7b) gpu7b=1; shift ;;
    --sanitize) sanitize=1; shift ;;
    --bench-7b) bench7b=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$prebuilt" ] || { echo "usage: tests/gpu/run.sh --prebuilt DIR [--golden]" >&2; exit 2; }

bin="$prebuilt/bin"
export LD_LIBRARY_PATH="$PWD/$prebuilt/lib:${LD_LIBRARY_PATH:-}"
# Recreate the paths compiled into the test binaries (source tree, test tokenizer).
src=$(cat "$prebuilt/source_dir")
[ -e "$src" ] || { mkdir -p "$(dirname "$src")"; ln -s "$PWD" "$src"; }
tokpath=$(cat "$prebuilt/tokenizer_path")
mkdir -p "$(dirname "$tokpath")"; cp "$prebuilt/tokenizer.json" "$tokpath"
mkdir -p "$src/build/gpu/bin" 2>/dev/null; cp -n "$bin"/* "$src/build/gpu/bin/" 2>/dev/null || true

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/gpu.txt"
declare -A status
for t in "$bin"/test_*; do
  name=$(basename "$t")
  "$t" --gtest_brief=1 >"$LOGS/$name.log" 2>&1
  rc=$?
  if grep -q '\[  SKIPPED \] [1-9]' "$LOGS/$name.log"; then status[$name]="skipped"
  elif [ $rc = 0 ]; then status[$name]="passed"; else status[$name]="FAILED"; fi
done
cat "$LOGS"/test_*.log > "$OUT/tests.log"

"$bin/cosmos-cli" bench-tokenizer --tokenizer "$tokpath" --mb 1 --reps 3 --json >"$LOGS/bench_tokenizer.json" 2>&1
bench_mbs=$(python3 -c "import json;print('%.1f'%json.load(open('$LOGS/bench_tokenizer.json'))['encode_mb_per_s'])" 2>/dev/null)

sanitize_status="not run"
if [ $sanitize = 1 ]; then
  # compute-sanitizer memcheck over the GPU tests (kernels and the CUDA backend on the tiny model).
  sanitize_status="clean"
  for t in "$bin"/test_gpu_*; do
    compute-sanitizer --tool memcheck "$t" > "$LOGS/san_$(basename "$t").txt" 2>&1
    grep -q "ERROR SUMMARY: 0 errors" "$LOGS/san_$(basename "$t").txt" || sanitize_status="ERRORS in $(basename "$t")"
    grep -E "ERROR SUMMARY|Invalid" "$LOGS/san_$(basename "$t").txt" | head -5 >> "$OUT/tests.log"
  done
fi

bench_line="not built"
if [ -x "$bin/bench_kernels" ]; then
  "$bin/bench_kernels" > "$LOGS/bench_kernels.txt" 2>&1
  cat "$LOGS/bench_kernels.txt" >> "$OUT/tests.log"
  bench_line=$(tail -1 "$LOGS/bench_kernels.txt")
  copy_line=$(grep "device copy" "$LOGS/bench_kernels.txt")
fi

golden_status="not run"
if [ $golden = 1 ]; then
  tiny=/tmp/cosmos-tiny tiny_lm=/tmp/cosmos-tiny-lm
  "$bin/cosmos-cli" make-test-model --preset tiny --seed 1 --shards 2 -q --tokenizer "$tokpath" --out "$tiny"
  "$bin/cosmos-cli" make-test-model --preset tiny --seed 1 --shards 3 --layout language_model -q \
    --tokenizer "$tokpath" --out "$tiny_lm"
  PYTHONUNBUFFERED=1 python3 tests/golden/make_golden.py --tokenizer "$tokpath" --data tests/data \
    --out "$OUT/golden" --tiny-model "$tiny" --tiny-model-lm "$tiny_lm" --seed 1 >"$OUT/golden.log" 2>&1 \
    && golden_status="written to \$OUT/golden" || golden_status="FAILED (see golden.log)"
  tail -5 "$OUT/golden.log"
fi

cpu7b_status="not run" gpu7b_status="not run"
big=/tmp/cosmos-7b
if [ $cpu7b = 1 ] || [ $gpu7b = 1 ] || [ $bench7b = 1 ]; then
  t0=$SECONDS
  "$bin/cosmos-cli" make-test-model --preset cosmos-reason1-7b --seed 1 --shards 4 -q \
    --tokenizer "$tokpath" --out "$big" >"$LOGS/make7b.txt" 2>&1
  echo "$((SECONDS - t0)) s" >> "$LOGS/make7b.txt"
fi
if [ $gpu7b = 1 ]; then
  # The CUDA backend on the 7B shape: 17-token prompt, 128 greedy tokens.
  "$bin/cosmos-cli" generate --model "$big" --device cuda --raw --temperature 0 --max-tokens 128 --context 4096 \
    --prompt "The robot arm moves the red cup to the left of the plate, and then it" --json \
    > "$LOGS/gpu7b.json" 2>"$LOGS/gpu7b.err"
  gpu7b_status=$(python3 -c "import json;s=json.load(open('$LOGS/gpu7b.json'))['stats'];print('prefill %.1f tok/s, decode %.1f tok/s, ttft %.3f s, %s'%(s['prefill_tok_per_s'],s['decode_tok_per_s'],s['ttft_s'],s['device']))" 2>/dev/null || echo FAILED)
  { echo "== gpu 7B"; cat "$LOGS/gpu7b.json" "$LOGS/gpu7b.err"; } >> "$OUT/tests.log"
fi
bench7b_status="not run"
if [ $bench7b = 1 ]; then
  # cosmos-cli bench on the 7B shape: prefill 128/2048, decode at depth 0/4096, medians of 3.
  "$bin/cosmos-cli" bench --model "$big" --device cuda --prompt-lens 128,2048 --depth 0,4096 --gen 128 --reps 3 \
    --json > "$LOGS/bench7b.json" 2>"$LOGS/bench7b.err"
  bench7b_status=$(python3 -c "
import json; j=json.load(open('$LOGS/bench7b.json'))
p=' '.join('pp%d %.0f tok/s'%(x['prompt_tokens'],x['tok_per_s']) for x in j['prefill'])
d=' '.join('tg@%d %.1f tok/s (%.0f%%)'%(x['depth'],x['tok_per_s'],x['pct_of_copy']) for x in j['decode'])
print(p+'; '+d+'; load %.1f s'%j['load_s'])" 2>/dev/null || echo FAILED)
  { echo "== bench 7B"; cat "$LOGS/bench7b.json" "$LOGS/bench7b.err"; } >> "$OUT/tests.log"
fi
if [ $cpu7b = 1 ]; then
  "$bin/cosmos-cli" inspect --model "$big" > "$LOGS/inspect7b.txt" 2>&1
  "$bin/cosmos-cli" generate --model "$big" --device cpu --raw --temperature 0 --max-tokens 8 --context 1024 \
    --prompt "The robot arm moves the red cup to the left of the plate, and then it" --json \
    > "$LOGS/cpu7b.json" 2>"$LOGS/cpu7b.err"
  cpu7b_status=$(python3 -c "import json;s=json.load(open('$LOGS/cpu7b.json'))['stats'];print('prefill %.1f tok/s, decode %.2f tok/s (%d threads)'%(s['prefill_tok_per_s'],s['decode_tok_per_s'],$(nproc)))" 2>/dev/null || echo FAILED)
  { echo "== make 7B: $(cat "$LOGS/make7b.txt")"; cat "$LOGS/inspect7b.txt"; cat "$LOGS/cpu7b.json" "$LOGS/cpu7b.err"; } >> "$OUT/tests.log"
fi

echo
echo "== Cosmos Chat GPU run =="
printf '%-32s %s\n' "GPU" "$(cat "$LOGS/gpu.txt")"
for k in $(echo "${!status[@]}" | tr ' ' '\n' | sort); do printf '%-32s %s\n' "$k" "${status[$k]}"; done
printf '%-32s %s\n' "tokenizer encode MB/s (1 core)" "${bench_mbs:-?}"
printf '%-32s %s\n' "device copy" "${copy_line:-?}"
printf '%-32s %s\n' "gemv bf16, one decode step" "$bench_line"
printf '%-32s %s\n' "compute-sanitizer memcheck" "$sanitize_status"
printf '%-32s %s\n' "HF golden data" "$golden_status"
printf '%-32s %s\n' "CPU backend, 7B shape" "$cpu7b_status"
printf '%-32s %s\n' "CUDA backend, 7B shape" "$gpu7b_status"
printf '%-32s %s\n' "cosmos-cli bench, 7B shape" "$bench7b_status"
for k in "${!status[@]}"; do [ "${status[$k]}" = FAILED ] && exit 1; done
exit 0
