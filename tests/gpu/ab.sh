#!/usr/bin/env bash
# Runs on the GPU machine: A/B of CUDA backend variants on one machine, in alternating rounds, so
# that run-to-run drift (clocks, other tenants) hits every variant alike. A variant is a name, a
# libcosmos-cuda.so (picked with COSMOS_CUDA_MODULE) and optional environment settings:
#   tests/gpu/ab.sh --prebuilt .carry [--rounds 2] [--depth 0,1024,4096] [--precision bf16] [--extra "ARGS"] \
#       old=.carry/ab/old.so new=.carry/lib/libcosmos-cuda.so new_pf=.carry/lib/libcosmos-cuda.so:COSMOS_GEMV_L2_PREFETCH=16777216
# A variant whose module is a directory is a whole other build (tests/gpu/pack.sh's layout: bin/, lib/):
# its own cosmos-cli, engine library and module, for builds whose backend interface differs, e.g.
#   old=.carry_old new=.carry/lib/libcosmos-cuda.so
# Each run is `cosmos-cli bench --random cosmos-reason1-7b --device cuda --prompt-lens 2048 --gen 128
# --reps 3` (medians of 3; --extra adds bench arguments, e.g. "--repetition-penalty 1.05"); one line
# per run: round, variant, prefill tok/s, decode tok/s per depth.
set -uo pipefail
cd "$(dirname "$0")/../.."
prebuilt="" rounds=2 depth="0,1024,4096" precision=bf16 extra=""
variants=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    *=*) variants+=("$1"); shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$prebuilt" ] && [ ${#variants[@]} -gt 0 ] || { echo "usage: tests/gpu/ab.sh --prebuilt DIR NAME=MODULE[:ENV=VAL...] ..." >&2; exit 2; }
export LD_LIBRARY_PATH="$PWD/$prebuilt/lib:${LD_LIBRARY_PATH:-}"
for round in $(seq 1 "$rounds"); do
  for v in "${variants[@]}"; do
    name=${v%%=*}
    spec=${v#*=}
    module=${spec%%:*}
    envs=()
    [[ "$spec" == *:* ]] && IFS=: read -r -a envs <<<"${spec#*:}"
    # stderr kept: a variant's COSMOS_QGEMV_TUNING says what it took and what it left out (a typo
    # would otherwise time the default plan under the variant's name); shown in the first round.
    cli="$prebuilt/bin/cosmos-cli" libpath=$LD_LIBRARY_PATH
    if [ -d "$module" ]; then
      cli="$module/bin/cosmos-cli" libpath="$PWD/$module/lib:$LD_LIBRARY_PATH" module="$module/lib/libcosmos-cuda.so"
    fi
    err=$(mktemp)
    json=$(env "${envs[@]}" LD_LIBRARY_PATH="$libpath" COSMOS_CUDA_MODULE="$PWD/$module" "$cli" bench --random cosmos-reason1-7b \
      --device cuda --precision "$precision" --prompt-lens 2048 --depth "$depth" --gen 128 --reps 3 $extra --json 2>"$err")
    [ "$round" = 1 ] && grep -a "^COSMOS_QGEMV_TUNING" "$err" | sed "s/^/  $name: /"
    if [ -z "$json" ]; then
      echo "$round $name: bench failed: $(tail -2 "$err" | tr '\n' ' ')"
      rm -f "$err"
      continue
    fi
    rm -f "$err"
    echo "$json" | python3 -c "
import json, sys
try:
    j = json.load(sys.stdin)
except Exception:
    print('$round $name: bench failed'); sys.exit()
print('$round %-10s pp2048 %6.0f ' % ('$name', j['prefill'][0]['tok_per_s']) +
      ' '.join('tg@%d %6.1f' % (d['depth'], d['tok_per_s']) for d in j['decode']))"
  done
done
