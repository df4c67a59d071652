#!/usr/bin/env bash
# Runs on the GPU machine: a one-knob screen of the quantized one-token products in the engine. For
# each precision and each of the 7B's product shapes, tests/gpu/ab.sh times the automatic plan (A)
# and one variant per knob value (COSMOS_QGEMV_TUNING="SHAPE/KEY=VALUE", kernels/qgemv_tuning_spec.h),
# one round at depth 0, then lists every variant that beat its shape's A by more than --margin
# percent. A screen, not a verdict: a listed variant needs a 2-round A/B (and depth 4096) before it
# becomes a default. A knob a shape has no variant for leaves the plan as it is (the row reads as A).
#   tests/gpu/knob_screen.sh --prebuilt .carry [--precisions "int4 int8"] [--shapes "qkv o gateup down lm_head"]
#       [--budget SECONDS] [--margin 0.5]
# Variant names read SHAPE.KEYVALUE (qkv.rows1). --budget stops starting new shapes after that many seconds (what ran is still summarized).
set -uo pipefail
cd "$(dirname "$0")/../.."
prebuilt="" precisions="int4 int8" shapes="qkv o gateup down lm_head" budget=0 margin=0.5
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --margin) margin=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$prebuilt" ] || { echo "usage: tests/gpu/knob_screen.sh --prebuilt DIR [options]" >&2; exit 2; }
module="$prebuilt/lib/libcosmos-cuda.so"
[ -f "$module" ] || { echo "knob_screen: no $module" >&2; exit 2; }
# A is the automatic plan, whatever `cosmos-cli tune` saved on this machine.
export COSMOS_DECODE_TUNING=0
log=$(mktemp)
end=$((SECONDS + budget))
for p in $precisions; do
  # The knobs' values (kernels/qgemv_tuning_spec.h); mma picks int4's tensor-core kernel only.
  values="rows=1 rows=2 rows=4 loads=4 loads=7 loads=8 pipeline=0 pipeline=1 stage=0 stage=1 l2=0 l2=1 wide=0 wide=1"
  [ "$p" = int4 ] && values="$values mma=0 mma=2 mma=4"
  for s in $shapes; do
    if [ "$budget" -gt 0 ] && [ $SECONDS -ge $end ]; then
      echo "knob_screen: budget of ${budget}s spent; $p from $s on not run"
      break
    fi
    variants=("A=$module")
    for v in $values; do variants+=("$s.${v/=/}=$module:COSMOS_QGEMV_TUNING=$s/$v"); done
    echo "== $p $s"
    tests/gpu/ab.sh --prebuilt "$prebuilt" --rounds 1 --depth 0 --precision "$p" "${variants[@]}" 2>&1 \
      | grep -v "products take" | sed "s/^/$p /" | tee -a "$log"
  done
done
# Lines read "PRECISION ROUND NAME pp2048 N tg@0 T"; a shape's A comes before its variants.
echo "== variants faster than their shape's A by more than $margin%"
# A shape whose A failed ("A: bench failed") compares nothing rather than against the last shape's A.
awk -v m="$margin" '$3 == "A" { a = $7; next } $3 == "A:" { a = 0; next }
  $6 == "tg@0" && a > 0 && $7 > a * (1 + m / 100) { printf "%s %-22s %7.1f against A %7.1f (%+.1f%%)\n", $1, $3, $7, a, 100 * ($7 / a - 1); n++ }
  END { if (!n) print "none" }' "$log"
rm -f "$log"
