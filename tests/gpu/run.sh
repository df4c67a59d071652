#!/usr/bin/env bash
# Runs on the GPU machine, in one call: GPU tests, the unit tests, the tokenizer benchmark, and
# (with --golden) the Hugging Face golden data. Logs go to $OUT; a short table is printed last.
#   tests/gpu/run.sh --prebuilt .carry [--golden] [--cpu-7b] [--gpu-7b] [--bench-7b] [--parity-7b] [--quant-7b]
#                    [--bench-batch] [--sanitize] [--ktrace] [--tune-7b]
# --tune-7b: cosmos-cli tune on the 7B shape for each precision in $COSMOS_TUNE_PRECISIONS (default:
#   int4 int8 fp8), before --bench-7b, which then decodes with what it saved (bench prints it).
# --bench-7b: cosmos-cli bench for each precision in $COSMOS_BENCH_PRECISIONS (default: all five)
#   and each KV cache in $COSMOS_BENCH_KV (default: full; "full int8" also runs the int8 cache), at
#   the decode depths in $COSMOS_BENCH_DEPTHS (default: 0,4096), and
#   bf16 decoding with the app's default sampling (temperature 0.6, top-p 0.95, penalty 1.05;
#   COSMOS_BENCH_APP=0 leaves it out).
# --bench-batch: cosmos-cli bench --batch on the 7B shape (decode throughput of 1-256 sequences at
#   once, 128-token prompts, 128 steps): bf16 at every size, fp8 and int8 at 64 and 256
#   ($OUT/bench_batch_*.json for the plot, docs/plots/plot_batch.py).
# --batch-cli: cosmos-cli batch on the random 7B model (bf16, greedy): 1,000 prompts of ~128 tokens,
#   128 tokens each, 256 at once; and the first 100 of them one at a time (--max-batch 1).
# --ktrace: the per-kernel timestamps of the quantized one-token step (kernels/ktrace.cuh), with the
#   module that `COSMOS_PACK_KTRACE=1 tests/gpu/pack.sh` adds as .carry/lib/ktrace/libcosmos-cuda.so:
#   cosmos-cli bench at depths 0 and 4096 (--settle-ms 1000: outside the power cap's window) for each
#   precision in $COSMOS_KTRACE_PRECISIONS (default: int4 int8), tables by tests/gpu/ktrace.py;
#   $COSMOS_KTRACE_DETAIL (e.g. attention, or q/k/v,down) adds those kernels' per-block quantiles (ktrace.py --detail).
# --quant-7b: test_gpu_cuda_quant also measures int8 / fp8 / int4 against bf16 on the random 7B shape.
# Always (when built, unless COSMOS_BENCHES=0, which saves ~2 minutes of device time, or COSMOS_BENCHES
# names the ones to run, e.g. "bench_gemv_quant"): bench_kernels,
# bench_gemv_quant, bench_gemm_q_small (quantized weights times 1-64 tokens), bench_phases (the cost of a phase boundary), bench_layer_flow (the step's structure: kernels against a
# dataflow kernel), bench_attention (prefill attention on
# the 7B shape), bench_gemm_swiglu (the fused gate/up + SwiGLU product against cuBLASLt + swiglu),
# bench_decode_attention (decode attention per context length).
# --parity-7b: the random cosmos-reason1-7b model against Hugging Face bf16 (test_gpu_parity_7b); its
# golden data is made here too (tests/golden/make_golden_7b.py -> $OUT/golden_7b_bf16.json) with
# --golden or when tests/data/golden_7b_bf16.json is not committed.
# .carry comes from tests/gpu/pack.sh (binaries built on the development machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cosmos-gpu-out}
mkdir -p "$OUT"
# $OUT brings back at most 8 files: per-test logs stay in $LOGS (and are appended to tests.log),
# $OUT gets tests.log, golden/ (6 files) and golden_7b_bf16.json.
LOGS=$(mktemp -d)
prebuilt="" golden=0 cpu7b=0 gpu7b=0 sanitize=0 bench7b=0 parity7b=0 quant7b=0 benchbatch=0 batchcli=0 ktrace=0 tune7b=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --golden) golden=1; shift ;;
    --cpu-7b) cpu7b=1; shift ;;
    --gpu-7b) gpu7b=1; shift ;;
    --sanitize) sanitize=1; shift ;;
    --bench-7b) bench7b=1; shift ;;
    --parity-7b) parity7b=1; shift ;;
    --quant-7b) quant7b=1; shift ;;
    --bench-batch) benchbatch=1; shift ;;
    --batch-cli) batchcli=1; shift ;;
    --ktrace) ktrace=1; shift ;;
    --tune-7b) tune7b=1; shift ;;
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
[ $quant7b = 1 ] && export COSMOS_QUANT_7B=1
# Each binary's log goes to tests.log and its status to stdout as soon as it ends, so a call cut
# short by its time limit still brings back what finished.
: > "$OUT/tests.log"
for t in "$bin"/test_*; do
  name=$(basename "$t")
  # COSMOS_TESTS="test_a test_b" runs only those binaries (default: all).
  if [ -n "${COSMOS_TESTS:-}" ] && [[ " $COSMOS_TESTS " != *" $name "* ]]; then continue; fi
  "$t" --gtest_brief=1 >"$LOGS/$name.log" 2>&1
  rc=$?
  # A failure wins over skips; a binary whose every test skipped is "skipped"; one that ran some
  # tests and skipped others says how many it skipped.
  npass=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$LOGS/$name.log" | tail -1)
  nskip=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$LOGS/$name.log" | tail -1)
  if [ $rc != 0 ]; then status[$name]="FAILED"
  elif [ "${nskip:-0}" != 0 ] && [ "${npass:-0}" = 0 ]; then status[$name]="skipped"
  elif [ "${nskip:-0}" != 0 ]; then status[$name]="passed ($nskip skipped)"
  else status[$name]="passed"; fi
  cat "$LOGS/$name.log" >> "$OUT/tests.log"
  printf 'ran %-32s %s\n' "$name" "${status[$name]}"
done

"$bin/cosmos-cli" bench-tokenizer --tokenizer "$tokpath" --mb 1 --reps 3 --json >"$LOGS/bench_tokenizer.json" 2>&1
bench_mbs=$(python3 -c "import json;print('%.1f'%json.load(open('$LOGS/bench_tokenizer.json'))['encode_mb_per_s'])" 2>/dev/null)

sanitize_status="not run"
if [ $sanitize = 1 ]; then
  # compute-sanitizer over the GPU tests (kernels and the CUDA backend on the tiny model).
  sanitize_status="clean"
  cut_short=""  # runs stopped by COSMOS_SANITIZE_TIMEOUT: no error seen, but not every test checked
  lib_only=""   # racecheck runs whose only hazards are inside cuBLASLt's kernels
  no_gtest=""  # runs whose log lacks gtest's own summary lines (the binary's output lost or never reached)
  # COSMOS_SANITIZE="test_gpu_a test_gpu_b" limits it to those binaries (default: every test_gpu_*).
  # COSMOS_SANITIZE_TOOLS: the tools, in turn (default memcheck; also racecheck, synccheck, initcheck).
  tools=${COSMOS_SANITIZE_TOOLS:-memcheck}
  # COSMOS_SANITIZE_PARALLEL=1: each ':'-separated pattern of COSMOS_SANITIZE_FILTER runs as a process
  # of its own, all at once, each with its own log. The processes share the GPU: 9 racecheck runs of
  # test_gpu_batch_decode's full cases at once finished none of the 8 long ones in 520 s on an H100
  # (docs/PERFORMANCE.md, session 67), so it pays for short runs only.
  # COSMOS_BATCH_TEST_LIGHT (default 1 here): test_gpu_batch_decode's cases in their light form (the
  # same kernels in 1/14 to 1/21 of the forward passes); 0 runs them in full (one 64-sequence case: over 430 s
  # under racecheck on an H100).
  # The peak resident memory of a run's process tree (the tool and the test), sampled every 2 s into
  # $2 in MB: racecheck's host memory grows over thousands of sampling calls or decode steps, with
  # or without CUDA graphs (docs/PERFORMANCE.md, sessions 69-70), and a run the OOM killer ends
  # should say how far it got.
  watch_rss() {  # root pid, file
    local root=$1 out=$2 peak=0 r
    while kill -0 "$root" 2>/dev/null; do
      r=$(ps -eo pid=,ppid=,rss= | awk -v root="$root" '{up[$1] = $2; kb[$1] = $3}
        END {for (p in up) {q = p; while (q != root && (q in up) && up[q] != q) q = up[q]; if (q == root) s += kb[p]}
             print int(s / 1024)}')
      [ "$r" -gt "$peak" ] && { peak=$r; echo "$peak" > "$out"; }
      sleep 2
    done
  }
  san_eval() {  # tool, binary, log, exit status of the tool's run, name for the summaries
    local tool=$1 t=$2 log=$3 rc=$4 name=$5 bad=0 file
    if [ "$rc" = 124 ]; then
      local ndone
      ndone=$(grep -c '^\[       OK \]' "$log")
      echo "cut short after ${COSMOS_SANITIZE_TIMEOUT}s, $ndone tests done" >> "$log"
      cut_short="$cut_short; $tool $name cut short after $ndone tests"
      grep -qE "ERROR SUMMARY: [1-9]|\([1-9][0-9]* errors|Race reported|Invalid" "$log" && bad=1
    elif ! grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors" "$log"; then
      bad=1
    fi
    # A test process that dies under the tool still ends with a clean summary (the tool's exit status
    # 0): racecheck of BatchDecodeScheduler grew to 130 GB of host memory and was killed by the
    # kernel's OOM killer (docs/PERFORMANCE.md, session 68). Such a run is an error, with the
    # kernel's last words on it where dmesg can be read.
    if grep -qE "process didn't terminate successfully|Target application returned an error" "$log"; then
      bad=1
      { echo "== dmesg (last lines)"; dmesg 2>/dev/null | grep -iE "oom|killed process" | tail -3; } >> "$log"
    fi
    # racecheck reports shared-memory hazards inside cuBLASLt's own Hopper GEMM kernels (nvjet_*,
    # bf16 prompts; docs/PERFORMANCE.md, session 55). Excluding them (--kernel-name-exclude) makes
    # the tool fail on a hardware exception, so they are checked and told apart instead: a run whose
    # every hazard lies inside nvjet kernels, with no failed test and no tool error, is not this
    # project's error and is reported as such.
    if [ $bad = 1 ] && [ "$tool" = racecheck ] && grep -q "Race reported" "$log" \
      && ! grep -qE '^\[  FAILED  \]|Sanitizer Error|Invalid|terminate successfully' "$log" \
      && ! grep -E "Race reported|^=========     and " "$log" | grep -qv " at nvjet_"; then
      bad=0
      lib_only="$lib_only; racecheck $name: hazards only inside cuBLASLt's nvjet kernels"
    fi
    [ $bad = 1 ] && sanitize_status="ERRORS in $tool $name"
    # The outcome first (the tests that passed, the tool's summary), then the reports, each line once with
    # its count (racecheck repeats a hazard per launch).
    [ -s "$log.rss" ] && echo "peak host memory of the run's processes: $(cat "$log.rss") MB" >> "$log"
    { echo "$tool $name:"
      grep -a "^peak host memory" "$log" | tail -1
      grep -E '^\[       OK \]' "$log" | head -20  # which tests finished (and passed)
      grep -E "SUMMARY|PASSED|FAILED|cut short|terminate successfully|returned an error|Killed process" "$log" | head -6
      grep -E "Invalid|Race reported|^=========     and |Sanitizer Error" "$log" | sort | uniq -c | sort -rn | head -6; } >> "$OUT/tests.log"
    # Every run keeps its report (the first 400 lines) for reading back, a clean one too, so that
    # its summary always shows what ran; a run whose gtest summary is missing is reported as such.
    file=$(basename "$log")
    grep -v "Host Frame" "$log" | head -400 > "$OUT/$file"
    grep -qE '^\[==========\] [0-9]+ tests? from .* ran|^\[  PASSED  \]' "$log" \
      || [ "$rc" = 124 ] || no_gtest="$no_gtest; $tool $name: no gtest summary in its log"
  }
  for tool in $tools; do
    for t in "$bin"/test_gpu_*; do
      if [ -n "${COSMOS_SANITIZE:-}" ] && [[ " $COSMOS_SANITIZE " != *" $(basename "$t") "* ]]; then continue; fi
      # COSMOS_SANITIZE_FILTER: a gtest filter for those runs (the tools are slow on the 7B-sized cases).
      filters=("${COSMOS_SANITIZE_FILTER:-}")
      if [ "${COSMOS_SANITIZE_PARALLEL:-0}" = 1 ] && [ -n "${COSMOS_SANITIZE_FILTER:-}" ]; then
        IFS=: read -r -a filters <<< "$COSMOS_SANITIZE_FILTER"
      fi
      pids=() names=() logs=()
      for f in "${filters[@]}"; do
        name=$(basename "$t")
        [ ${#filters[@]} -gt 1 ] && name="$name:${f##*/}"
        file=$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_')
        log="$LOGS/san_${tool}_$file.txt"
        # COSMOS_SANITIZE_TIMEOUT: seconds per run (0: no limit); a run cut short says so.
        # COSMOS_SANITIZE_ARGS: more compute-sanitizer options, word-split (e.g. "--kernel-name
        # kns=topk" checks only kernels whose name holds "topk"; the others run unchecked).
        # The GEMM tuner's timing runs would take minutes under the tools: cuBLASLt's heuristic choices.
        timeout "${COSMOS_SANITIZE_TIMEOUT:-0}" env -u COSMOS_QUANT_7B COSMOS_GEMM_AUTOTUNE=0 \
          COSMOS_BATCH_TEST_LIGHT="${COSMOS_BATCH_TEST_LIGHT:-1}" compute-sanitizer --tool "$tool" ${COSMOS_SANITIZE_ARGS:-} "$t" ${f:+--gtest_filter=$f} > "$log" 2>&1 &
        pids+=($!); names+=("$name"); logs+=("$log")
        rm -f "$log.rss"; watch_rss "$!" "$log.rss" &
      done
      for i in "${!pids[@]}"; do
        rc=0
        wait "${pids[$i]}" || rc=$?
        san_eval "$tool" "$t" "${logs[$i]}" "$rc" "${names[$i]}"
      done
    done
  done
  [ "$sanitize_status" = clean ] && [ -n "$cut_short$lib_only$no_gtest" ] && sanitize_status="no error seen${cut_short}${lib_only}${no_gtest}"
fi

benches=${COSMOS_BENCHES:-1}
nobench="not built"
[ "$benches" = 0 ] && nobench="skipped (COSMOS_BENCHES=0)"
# COSMOS_BENCHES="bench_gemv_quant bench_layer_flow": only the named benchmarks (1: all, 0: none).
want_bench() {  # name: run it?
  [ "$benches" = 1 ] || [[ " $benches " == *" $1 "* ]]
}
[[ "$benches" != 0 && "$benches" != 1 ]] && nobench="skipped (COSMOS_BENCHES=\"$benches\")"
bench_line=$nobench
if want_bench bench_kernels && [ -x "$bin/bench_kernels" ]; then
  "$bin/bench_kernels" > "$LOGS/bench_kernels.txt" 2>&1
  cat "$LOGS/bench_kernels.txt" >> "$OUT/tests.log"
  bench_line=$(tail -1 "$LOGS/bench_kernels.txt")
  copy_line=$(grep "device copy" "$LOGS/bench_kernels.txt")
fi

qbench_line=$nobench
if want_bench bench_gemv_quant && [ -x "$bin/bench_gemv_quant" ]; then
  # COSMOS_QBENCH_ARGS="--sweep": every launch variant per format and shape; "--chain": the step's
  # products in order, with launch variants (bench_gemv_quant.cu).
  "$bin/bench_gemv_quant" ${COSMOS_QBENCH_ARGS:-} > "$LOGS/bench_gemv_quant.txt" 2>&1
  { echo "== bench_gemv_quant"; cat "$LOGS/bench_gemv_quant.txt"; } >> "$OUT/tests.log"
  qbench_line=$(tail -3 "$LOGS/bench_gemv_quant.txt" | tr '\n' ' ')
fi
qsmall_line=$nobench
if want_bench bench_gemm_q_small && [ -x "$bin/bench_gemm_q_small" ]; then
  # Quantized weights times 1-64 tokens on tensor cores (batched decode, short prompts).
  "$bin/bench_gemm_q_small" > "$LOGS/bench_gemm_q_small.txt" 2>&1
  { echo "== bench_gemm_q_small"; cat "$LOGS/bench_gemm_q_small.txt"; } >> "$OUT/tests.log"
  qsmall_line=$(grep "step's products" "$LOGS/bench_gemm_q_small.txt" | sed 's/ step.s products (28 layers + lm_head)://' |
    tr -s ' ' | tr '\n' '|')
fi
quant_lines=$(grep -h "\[ measured \]" "$LOGS/test_gpu_cuda_quant.log" 2>/dev/null | grep "random 7B" | sed 's/.*GPU, //')

phases_line=$nobench
if want_bench bench_phases && [ -x "$bin/bench_phases" ]; then
  # The cost of a dependent phase boundary (kernels + PDL against a persistent kernel; bench_phases.cu).
  "$bin/bench_phases" > "$LOGS/bench_phases.txt" 2>&1
  { echo "== bench_phases"; cat "$LOGS/bench_phases.txt"; } >> "$OUT/tests.log"
  phases_line=$(grep -E '^(0\.0|25\.7) ' "$LOGS/bench_phases.txt" | awk -F'|' '{gsub(/ +/, " "); printf "%s MB: kernels+PDL%s, persistent%s; ", $1, $2, $6}')
fi

flow_line=$nobench
if want_bench bench_layer_flow && [ -x "$bin/bench_layer_flow" ]; then
  # The decode step's structure at its floor: 5 kernels per layer against a dataflow kernel
  # (bench_layer_flow.cu), int8 bytes, no context; us per layer.
  # (The ring variants wait on mbarriers and counters: a bookkeeping error would hang, so a limit.)
  timeout 180 "$bin/bench_layer_flow" --fmt int8 > "$LOGS/bench_layer_flow.txt" 2>&1 || echo "bench_layer_flow: exit $?" >> "$LOGS/bench_layer_flow.txt"
  { echo "== bench_layer_flow"; cat "$LOGS/bench_layer_flow.txt"; } >> "$OUT/tests.log"
  flow_line=$(awk -F'|' '/^(kernels \(5|dataflow \(|no waits|ring|bytes at)/ {gsub(/ +$/, "", $1); gsub(/ /, "", $3); printf "%s %s; ", $1, $3}' \
    "$LOGS/bench_layer_flow.txt")
fi

attention_line=$nobench
if want_bench bench_attention && [ -x "$bin/bench_attention" ]; then
  # Causal prefill attention on the 7B shape (bench_attention.cu); its last line goes into the table.
  "$bin/bench_attention" > "$LOGS/bench_attention.txt" 2>&1
  { echo "== bench_attention"; cat "$LOGS/bench_attention.txt"; } >> "$OUT/tests.log"
  attention_line=$(grep '^prefill attention 2048:' "$LOGS/bench_attention.txt" | sed 's/^prefill attention 2048: //')
  [ -n "$attention_line" ] || attention_line="$(tail -1 "$LOGS/bench_attention.txt")"
fi

swiglu_line=$nobench
if want_bench bench_gemm_swiglu && [ -x "$bin/bench_gemm_swiglu" ]; then
  # The MLP's gate/up product with SwiGLU fused, against cuBLASLt + swiglu (bench_gemm_swiglu.cu).
  "$bin/bench_gemm_swiglu" > "$LOGS/bench_gemm_swiglu.txt" 2>&1
  { echo "== bench_gemm_swiglu"; cat "$LOGS/bench_gemm_swiglu.txt"; } >> "$OUT/tests.log"
  swiglu_line=$(grep '^gate/up + swiglu 2048 bf16:' "$LOGS/bench_gemm_swiglu.txt" | sed 's/^gate\/up + swiglu 2048 bf16: //')
  [ -n "$swiglu_line" ] || swiglu_line="$(tail -1 "$LOGS/bench_gemm_swiglu.txt")"
fi

decode_attention_line=$nobench
if want_bench bench_decode_attention && [ -x "$bin/bench_decode_attention" ]; then
  # Decode attention on the 7B shape per context and knob setting (bench_decode_attention.cu).
  "$bin/bench_decode_attention" > "$LOGS/bench_decode_attention.txt" 2>&1
  { echo "== bench_decode_attention"; cat "$LOGS/bench_decode_attention.txt"; } >> "$OUT/tests.log"
  decode_attention_line=$(grep '^decode attention ' "$LOGS/bench_decode_attention.txt" | sed 's/^decode attention //')
  [ -n "$decode_attention_line" ] || decode_attention_line="$(tail -1 "$LOGS/bench_decode_attention.txt")"
fi

golden_status="not run"
if [ $golden = 1 ]; then
  tiny=/tmp/cosmos-tiny tiny_lm=/tmp/cosmos-tiny-lm
  "$bin/cosmos-cli" make-test-model --preset tiny --seed 1 --shards 2 -q --tokenizer "$tokpath" --out "$tiny"
  "$bin/cosmos-cli" make-test-model --preset tiny --seed 1 --shards 3 --layout language_model -q \
    --tokenizer "$tokpath" --out "$tiny_lm"
  PYTHONUNBUFFERED=1 python3 tests/golden/make_golden.py --tokenizer "$tokpath" --data tests/data \
    --out "$OUT/golden" --tiny-model "$tiny" --tiny-model-lm "$tiny_lm" --seed 1 >"$LOGS/golden.log" 2>&1 \
    && golden_status="written to \$OUT/golden" || golden_status="FAILED (see tests.log)"
  tail -5 "$LOGS/golden.log"
  { echo "== make_golden.py"; cat "$LOGS/golden.log"; } >> "$OUT/tests.log"
fi

cpu7b_status="not run" gpu7b_status="not run"
big=/tmp/cosmos-7b seed7b=1  # one 7B model (15 GB) for all the 7B runs; the parity golden records its seed
if [ $cpu7b = 1 ] || [ $gpu7b = 1 ] || [ $parity7b = 1 ] || [ $batchcli = 1 ]; then
  t0=$SECONDS
  "$bin/cosmos-cli" make-test-model --preset cosmos-reason1-7b --seed $seed7b --shards 4 -q \
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
  # Loading the checkpoint (now in the page cache) in each precision: what a precision switch costs.
  gpu7b_status+="; load from the page cache:"
  for prec in bf16 int8 fp8 int4; do
    "$bin/cosmos-cli" bench --model "$big" --device cuda --precision $prec --prompt-lens 128 --depth 0 --gen 32 \
      --reps 1 --json > "$LOGS/load7b_$prec.json" 2>"$LOGS/load7b_$prec.err"
    gpu7b_status+=" $prec $(python3 -c "import json;j=json.load(open('$LOGS/load7b_$prec.json'));print('%.2f s (tg %.0f)'%(j['load_s'],j['decode'][0]['tok_per_s']))" 2>/dev/null || echo FAILED)"
    { echo "== load 7B $prec"; cat "$LOGS/load7b_$prec.json" "$LOGS/load7b_$prec.err"; } >> "$OUT/tests.log"
  done
fi
tune7b_status="not run"
if [ $tune7b = 1 ]; then
  tune7b_status=""
  for prec in ${COSMOS_TUNE_PRECISIONS:-int4 int8 fp8}; do
    log="$LOGS/tune7b_$prec"
    "$bin/cosmos-cli" tune --random cosmos-reason1-7b --device cuda --precision $prec --json > "$log.json" 2>"$log.err"
    tune7b_status+="$prec: $(python3 -c "
import json; j=json.load(open('$log.json'))
print('%s (%d variants, %d timings, %.0f s); '%(j['spec'] or 'automatic plan', j['candidates'], j['measurements'], j['seconds'])
  + ' '.join('@%d %.1f -> %.1f us'%(d['depth'], d['base_us'], d['tuned_us']) for d in j['depths']))" 2>/dev/null || echo FAILED) | "
    { echo "== tune 7B $prec"; cat "$log.json" "$log.err"; } >> "$OUT/tests.log"
  done
fi
bench7b_status="not run"
if [ $bench7b = 1 ]; then
  # cosmos-cli bench on the 7B shape with random weights generated on the GPU (no files): prefill
  # 128/2048, decode at depth 0/4096 (COSMOS_BENCH_DEPTHS, e.g. 0,4096,16384 to reach the graphs
  # past 8,192 tokens), medians of 3, for each precision.
  bench7b_status=""
  for kv in ${COSMOS_BENCH_KV:-full}; do
  for prec in ${COSMOS_BENCH_PRECISIONS:-bf16 fp16 int8 fp8 int4}; do
    name=$prec; [ "$kv" = full ] || name="$prec, KV $kv"
    log="$LOGS/bench7b_${prec}_$kv"
    "$bin/cosmos-cli" bench --random cosmos-reason1-7b --device cuda --precision $prec \
      --kv-cache $kv --prompt-lens 128,2048 --depth "${COSMOS_BENCH_DEPTHS:-0,4096}" --gen 128 --reps 3 --json > "$log.json" 2>"$log.err"
    bench7b_status+="$name: $(python3 -c "
import json; j=json.load(open('$log.json'))
p=' '.join('pp%d %.0f tok/s (ttft %.3f s)'%(x['prompt_tokens'],x['tok_per_s'],x['ttft_s']) for x in j['prefill'])
d=' '.join('tg@%d %.1f tok/s (%.0f%%%s)'%(x['depth'],x['tok_per_s'],x['pct_of_copy_with_kv'],
  '' if i == 0 else ', %.1f%% of tg@%d, bytes allow %.1f%%'%(100*x['speed_vs_first'],j['decode'][0]['depth'],100*x['bytes_bound_vs_first']))
  + ('' if not x.get('clocks') else ' [SM %.0f MHz, slowed %.0f%%]'%(x['clocks']['sm_mhz_mean'],100*x['clocks']['slowdown_share']))
  for i,x in enumerate(j['decode']))
print(p+'; '+d+'; load %.1f s'%j['load_s']+('; tuned: '+j['decode_tuning'] if j.get('decode_tuning') else ''))" 2>/dev/null || echo FAILED) | "
    { echo "== bench 7B $name"; cat "$log.json" "$log.err"; } >> "$OUT/tests.log"
  done
  done
  # Decoding as the app does by default (drawn at temperature 0.6, top-p 0.95, penalty 1.05), bf16.
  [ "${COSMOS_BENCH_APP:-1}" = 0 ] || { "$bin/cosmos-cli" bench --random cosmos-reason1-7b --device cuda --precision bf16 --prompt-lens 128 \
    --depth 0,4096 --gen 128 --reps 3 --temperature 0.6 --top-p 0.95 --repetition-penalty 1.05 --json \
    > "$LOGS/bench7b_app.json" 2>"$LOGS/bench7b_app.err"
  bench7b_status+="bf16, app sampling: $(python3 -c "
import json; j=json.load(open('$LOGS/bench7b_app.json'))
print(' '.join('tg@%d %.1f tok/s'%(x['depth'],x['tok_per_s']) for x in j['decode']))" 2>/dev/null || echo FAILED) | "
  { echo "== bench 7B bf16, app sampling"; cat "$LOGS/bench7b_app.json" "$LOGS/bench7b_app.err"; } >> "$OUT/tests.log"; }
fi
ktrace_status="not run"
if [ $ktrace = 1 ]; then
  ktmod="$PWD/$prebuilt/lib/ktrace/libcosmos-cuda.so"
  if [ ! -f "$ktmod" ]; then
    ktrace_status="no ktrace module in $prebuilt (COSMOS_PACK_KTRACE=1 tests/gpu/pack.sh)"
  else
    ktrace_status=""
    for prec in ${COSMOS_KTRACE_PRECISIONS:-int4 int8}; do
      for depth in 0 4096; do
        dir="$LOGS/kt_${prec}_$depth"; mkdir -p "$dir"
        COSMOS_CUDA_MODULE="$ktmod" COSMOS_KTRACE_DIR="$dir" "$bin/cosmos-cli" bench --random cosmos-reason1-7b \
          --device cuda --precision $prec --prompt-lens 128 --depth $depth --gen 32 --reps 1 --settle-ms 1000 \
          > "$dir.bench" 2>&1
        python3 tests/gpu/ktrace.py ${COSMOS_KTRACE_DETAIL:+--detail "$COSMOS_KTRACE_DETAIL"} "$dir"/*.bin > "$dir.txt" 2>&1
        { echo "== ktrace $prec @$depth"; tail -8 "$dir.bench"; cat "$dir.txt"; } >> "$OUT/tests.log"
        # The summary: each kernel's contribution per launch (us) and the token.
        line=$(awk '$1 == "kernel" {on = 1; next} on && NF >= 10 {printf "%s %s, ", $1, $3}
          /^per token/ {printf "token %s us", $3; on = 0}' "$dir.txt")
        [[ "$line" == *token* ]] || line="FAILED (tests.log)"
        ktrace_status+="$prec@$depth: $line | "
      done
    done
  fi
fi
benchbatch_status="not run"
if [ $benchbatch = 1 ]; then
  benchbatch_status=""
  for spec in ${COSMOS_BATCH_SPECS:-bf16:1,2,4,8,16,32,64,128,256 fp8:1,64,256 int8:1,64,256}; do
    prec=${spec%%:*} sizes=${spec#*:}
    "$bin/cosmos-cli" bench --random cosmos-reason1-7b --device cuda --precision $prec --batch $sizes --reps 2 --json \
      > "$OUT/bench_batch_$prec.json" 2>"$LOGS/bench_batch_$prec.err"
    benchbatch_status+="$prec: $(python3 -c "
import json; j=json.load(open('$OUT/bench_batch_$prec.json'))
print(' '.join('b%d %.0f (%.0f/stream)'%(x['batch'],x['tok_per_s'],x['per_stream_tok_per_s']) for x in j['batch']))" 2>/dev/null || echo FAILED) | "
    { echo "== bench batch $prec"; cat "$OUT/bench_batch_$prec.json" "$LOGS/bench_batch_$prec.err"; } >> "$OUT/tests.log"
  done
fi
batchcli_status="not run"
if [ $batchcli = 1 ]; then
  python3 - "$LOGS/prompts.jsonl" <<'PY'
import json, random, sys
random.seed(5)
words = "robot arm cup plate table left right moves picks places red blue green small large slowly then after before the a of to and".split()
with open(sys.argv[1], "w") as f:
    for i in range(1000):
        f.write(json.dumps({"id": i, "prompt": " ".join(random.choice(words) for _ in range(120))}) + "\n")
PY
  head -100 "$LOGS/prompts.jsonl" > "$LOGS/prompts100.jsonl"
  batchcli_status=""
  for run in "1000 256 prompts.jsonl" "100 1 prompts100.jsonl"; do
    set -- $run
    "$bin/cosmos-cli" batch --model "$big" --device cuda --input "$LOGS/$3" --output "$LOGS/batch_out_$1.jsonl" \
      --max-batch $2 --context 80000 --max-tokens 128 --temperature 0 > "$LOGS/batch_$1.txt" 2>&1
    batchcli_status+="$1 prompts, $2 at once: $(tail -1 "$LOGS/batch_$1.txt") | "
    { echo "== cosmos-cli batch, $1 prompts, max batch $2"; cat "$LOGS/batch_$1.txt"; head -c 600 "$LOGS/batch_out_$1.jsonl"; echo; } >> "$OUT/tests.log"
  done
fi
if [ $cpu7b = 1 ]; then
  "$bin/cosmos-cli" inspect --model "$big" > "$LOGS/inspect7b.txt" 2>&1
  "$bin/cosmos-cli" generate --model "$big" --device cpu --raw --temperature 0 --max-tokens 8 --context 1024 \
    --prompt "The robot arm moves the red cup to the left of the plate, and then it" --json \
    > "$LOGS/cpu7b.json" 2>"$LOGS/cpu7b.err"
  cpu7b_status=$(python3 -c "import json;s=json.load(open('$LOGS/cpu7b.json'))['stats'];print('prefill %.1f tok/s, decode %.2f tok/s (%d threads)'%(s['prefill_tok_per_s'],s['decode_tok_per_s'],$(nproc)))" 2>/dev/null || echo FAILED)
  { echo "== make 7B: $(cat "$LOGS/make7b.txt")"; cat "$LOGS/inspect7b.txt"; cat "$LOGS/cpu7b.json" "$LOGS/cpu7b.err"; } >> "$OUT/tests.log"
fi
parity7b_status="not run"
if [ $parity7b = 1 ]; then
  # The 7B shape against Hugging Face transformers bf16 on the same files (tests/gpu/test_parity_7b.cpp).
  golden7b=tests/data/golden_7b_bf16.json
  if [ $golden = 1 ] || [ ! -e "$golden7b" ]; then
    t0=$SECONDS
    PYTHONUNBUFFERED=1 python3 tests/golden/make_golden_7b.py --model "$big" --tokenizer "$tokpath" --seed $seed7b \
      --out "$OUT/golden_7b_bf16.json" >"$LOGS/golden7b.log" 2>&1 && golden7b="$OUT/golden_7b_bf16.json"
    echo "make_golden_7b.py: $((SECONDS - t0)) s" >> "$LOGS/golden7b.log"
    { echo "== make_golden_7b.py"; cat "$LOGS/golden7b.log"; } >> "$OUT/tests.log"
  fi
  if [ -e "$golden7b" ]; then
    case "$golden7b" in /*) ;; *) golden7b="$PWD/$golden7b" ;; esac
    COSMOS_PARITY_7B_DIR="$big" COSMOS_PARITY_7B_GOLDEN="$golden7b" "$bin/test_gpu_parity_7b" \
      >"$LOGS/parity7b.log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then st="FAILED"
    elif grep -q '\[  SKIPPED \] [1-9]' "$LOGS/parity7b.log"; then st="skipped"
    else st="passed"; fi
    status[test_gpu_parity_7b]=$st
    # One line for the table: per case top-1 agreement (all steps, decisive steps), the largest
    # relative error and the bound, the first step where our free-running greedy differs from HF's.
    parity7b_status="$st; $(python3 - "$LOGS/parity7b.log" <<'PY' 2>/dev/null || echo "see tests.log"
import re, sys
agree, err, bound, div = {"prefill": [], "decode": []}, [], "?", []
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"PARITY7B (prefill|decode) \S+: top-1 = HF bf16 greedy (\d+)/(\d+) \(decisive steps (\d+/\d+);"
                 r".* rel err vs HF bf16 max (\S+) mean \S+ \(bound (\S+)\)", line)
    if m:
        agree[m[1]].append("%s (%s)" % (m[2], m[4])); err.append(float(m[5])); bound = m[6]; steps = m[3]
    m = re.match(r"PARITY7B greedy \S+: first divergence from HF bf16 at step (\S+),", line)
    if m:
        div.append(m[1])
print("top-1 = HF bf16 greedy (decisive steps): prefill %s, decode %s of %s; rel err max %.3g (bound %s); "
      "greedy diverges at %s"
      % (" ".join(agree["prefill"]), " ".join(agree["decode"]), steps, max(err), bound, " ".join(div)))
PY
)"
    { echo "== test_gpu_parity_7b"; cat "$LOGS/parity7b.log"; } >> "$OUT/tests.log"
  else
    parity7b_status="FAILED: no golden (see make_golden_7b.py in tests.log)"
    status[test_gpu_parity_7b]=FAILED
  fi
fi

echo
echo "== Cosmos Chat GPU run =="
printf '%-32s %s\n' "GPU" "$(cat "$LOGS/gpu.txt")"
for k in $(echo "${!status[@]}" | tr ' ' '\n' | sort); do printf '%-32s %s\n' "$k" "${status[$k]}"; done
printf '%-32s %s\n' "tokenizer encode MB/s (1 core)" "${bench_mbs:-?}"
printf '%-32s %s\n' "device copy" "${copy_line:-?}"
printf '%-32s %s\n' "gemv bf16, one decode step" "$bench_line"
printf '%-32s %s\n' "gemv quantized, one decode step" "$qbench_line"
printf '%-32s %s\n' "quantized x 1-64 tokens, a step" "$qsmall_line"
printf '%-32s %s\n' "phase boundary (us per phase)" "$phases_line"
printf '%-32s %s\n' "layer structure, int8 (us/layer)" "$flow_line"
printf '%-32s %s\n' "prefill attention, 2048 tokens" "$attention_line"
printf '%-32s %s\n' "gate/up + SwiGLU, 2048 bf16" "$swiglu_line"
printf '%-32s %s\n' "decode attention (per layer)" "$decode_attention_line"
[ -n "$quant_lines" ] && printf '%-32s %s\n' "quantized vs bf16, random 7B" "$quant_lines"
printf '%-32s %s\n' "compute-sanitizer ${COSMOS_SANITIZE_TOOLS:-memcheck}" "$sanitize_status"
printf '%-32s %s\n' "HF golden data" "$golden_status"
printf '%-32s %s\n' "CPU backend, 7B shape" "$cpu7b_status"
printf '%-32s %s\n' "CUDA backend, 7B shape" "$gpu7b_status"
printf '%-32s %s\n' "cosmos-cli tune, 7B shape" "$tune7b_status"
printf '%-32s %s\n' "cosmos-cli bench, 7B shape" "$bench7b_status"
printf '%-32s %s\n' "bench --batch (tok/s), 7B shape" "$benchbatch_status"
printf '%-32s %s\n' "cosmos-cli batch, 7B shape" "$batchcli_status"
printf '%-32s %s\n' "HF bf16 parity, 7B shape" "$parity7b_status"
printf '%-32s %s\n' "kernel trace (us per launch)" "$ktrace_status"
for k in "${!status[@]}"; do [ "${status[$k]}" = FAILED ] && exit 1; done
exit 0
