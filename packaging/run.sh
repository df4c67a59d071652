#!/usr/bin/env bash
# Sets everything up, builds the release, and starts the Cosmos Chat desktop app.
# With $COSMOS_MODEL (default ~/models/Cosmos-Reason1-7B) holding a model folder (config.json) the
# app loads it; else the model saved in the app's settings; else the demo model (tiny, the real
# tokenizer, random weights), made once in the app's data folder, so the app is ready to chat.
# Extra arguments go to cosmos-chat (e.g. --verbose).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits for a clone in another folder too (paths under the clone hashed as relative ones), as
# .ci/run does.
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
packaging/setup.sh
cmake --workflow --preset release
app=build/release/bin/cosmos-chat
model="${COSMOS_MODEL:-$HOME/models/Cosmos-Reason1-7B}"
args=()
conf="${XDG_CONFIG_HOME:-$HOME/.config}/cosmos-chat/cosmos-chat.conf"
saved=""
[ -f "$conf" ] && saved=$(sed -n 's/^modelDir=//p' "$conf" | head -1)
if [ -f "$model/config.json" ]; then
  args+=(--model "$model")
elif [ -n "$saved" ] && [ -f "$saved/config.json" ]; then
  echo "Starting with the model chosen in the app's settings: $saved"
else
  # Ready to chat at once: the demo model (the real tokenizer, random weights: meaningless text).
  demo="${XDG_DATA_HOME:-$HOME/.local/share}/cosmos-chat/demo-model"
  if [ ! -f "$demo/config.json" ]; then
    build/release/bin/cosmos-cli make-test-model --preset tiny --seed 1 -q --out "$demo"
    # The marker the app recognises the demo model by (it labels it as random weights everywhere).
    printf '%s\n' "Cosmos Chat demo model: the tiny test model (2 layers, hidden size 64) with RANDOM weights" \
      "and the real tokenizer. It runs the whole app end to end, but its replies are meaningless text." \
      "Download nvidia/Cosmos-Reason1-7B for real answers." > "$demo/DEMO-MODEL.txt"
  fi
  echo "No model at $model (set COSMOS_MODEL=DIR, see README): starting on the demo model, whose random"
  echo "weights produce meaningless text. Choose the real model in Settings once it is downloaded."
  args+=(--model "$demo")
fi
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  echo "No display (DISPLAY / WAYLAND_DISPLAY unset): starting the app under xvfb-run, invisible." >&2
  echo "Run it from a desktop session to see it, or use cosmos-cli (build/release/bin/cosmos-cli)." >&2
  exec xvfb-run -a "$app" "${args[@]}" "$@"
fi
exec "$app" "${args[@]}" "$@"
