#!/usr/bin/env bash
# Runs on the GPU machine: #6's open question in one call, why the H200's fixed cost per quantized
# token (~400 us int8, ~460 us int4) is larger than an H100's (~325 us); docs/PERFORMANCE.md,
# sessions 80-83. With the pack unpacked (`tar -xJf .carry_pack/carry.tar.xz`, made with
# COSMOS_PACK_KTRACE=1 tests/gpu/pack.sh):
#   tests/gpu/fixed_cost.sh [--any-gpu] [NAME=MODULE ...]
# It writes under $OUT gpu.txt (the card, its maximum clocks and power limit) and on an H200 (any GPU
# with --any-gpu):
#   chain/        bench_gemv_quant --chain: the products in the engine's order, as a share of copy;
#   s4/, s8/      bench_gemv_quant --sweep --fmt int4 / int8: each product timed alone;
#   kt/           the per-kernel trace of the int8 and int4 steps, with the per-block waits and
#                 stagings of q/k/v, down and o (tests/gpu/ktrace.py --detail);
# and on any GPU:
#   bnd/          bench_phases (a dependent phase boundary: kernels + PDL, persistent kernels) and
#                 bench_stream (a read-only kernel per matrix size of the chain), seconds: the synthetic
#                 boundary and ramp costs, to set beside an H100's (per-card gap: ~0.5 us per launch
#                 would account for the ~75 us per token, sessions 7, 10 and 84);
#   ab_int4.txt, ab_int8.txt: tests/gpu/ab.sh at depths 0 and 4096, two rounds, of the pack's module
#                 ("base", the engine @0 on the same card) beside each NAME=MODULE given.
# Without an H200 (and without --any-gpu) only bnd/ and the A/B run. A short summary is printed last.
set -u
cd "$(dirname "$0")/../.." || exit 2
any=0
variants=()
for a in "$@"; do
  case "$a" in
    --any-gpu) any=1 ;;
    *=*) variants+=("$a") ;;
    *) echo "unknown argument $a" >&2; exit 2 ;;
  esac
done
O=${OUT:-/tmp/cosmos-gpu-out}
mkdir -p "$O"
[ -x .carry/bin/cosmos-cli ] || { echo "no .carry/bin/cosmos-cli: unpack the pack first" >&2; exit 2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
{ echo "GPU: $gpu"; nvidia-smi --query-gpu=clocks.max.sm,clocks.max.mem,power.limit --format=csv; } > "$O/gpu.txt"
t0=$(date +%s)
full=$any
echo "$gpu" | grep -q H200 && full=1
if [ "$full" = 1 ]; then
  # directory:bench_gemv_quant arguments
  for run in "chain:--chain" "s4:--sweep --fmt int4" "s8:--sweep --fmt int8"; do
    d=${run%%:*}
    mkdir -p "$O/$d"
    OUT="$O/$d" COSMOS_TESTS=none COSMOS_BENCHES=bench_gemv_quant COSMOS_QBENCH_ARGS="${run#*:}" \
      tests/gpu/run.sh --prebuilt .carry > "$O/$d/run.txt" 2>&1
  done
  mkdir -p "$O/kt"
  OUT="$O/kt" COSMOS_TESTS=none COSMOS_BENCHES=0 COSMOS_KTRACE_DETAIL="q/k/v,down,o" \
    COSMOS_KTRACE_PRECISIONS="int8 int4" tests/gpu/run.sh --prebuilt .carry --ktrace > "$O/kt/run.txt" 2>&1
  echo "benchmarks and trace: $(( $(date +%s) - t0 )) s"
fi
mkdir -p "$O/bnd"
for b in bench_phases bench_stream; do
  LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}" timeout 240 ".carry/bin/$b" > "$O/bnd/$b.txt" 2>&1 ||
    echo "$b: exit $?" >> "$O/bnd/$b.txt"
done
echo "boundary probes: $(( $(date +%s) - t0 )) s"
for p in int4 int8; do
  tests/gpu/ab.sh --prebuilt .carry --rounds 2 --depth 0,4096 --precision "$p" \
    base=.carry/lib/libcosmos-cuda.so "${variants[@]}" > "$O/ab_$p.txt" 2>&1
  echo "A/B $p: $(( $(date +%s) - t0 )) s"
done
cat "$O/gpu.txt"
if [ "$full" = 1 ]; then
  grep -h "automatic (as\|per token" "$O/chain/tests.log" | head -20
  grep -h "best:\|per token" "$O/s4/tests.log" "$O/s8/tests.log" | head -20
fi
cat "$O/bnd/bench_phases.txt" "$O/bnd/bench_stream.txt"
cat "$O/ab_int4.txt" "$O/ab_int8.txt"
