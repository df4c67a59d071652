#!/usr/bin/env bash
# Sets everything up, builds the release, and starts the Cosmos Chat desktop app.
# With $COSMOS_MODEL (default ~/models/Cosmos-Reason1-7B) holding a model folder (config.json) the
# app loads it; otherwise it opens on its welcome page, which offers to choose a folder, shows how
# to download the model, and can make a demo model (tiny, random weights) to try the app.
# Extra arguments go to cosmos-chat (e.g. --verbose).
set -euo pipefail
cd "$(dirname "$0")/.."
packaging/setup.sh
cmake --workflow --preset release
app=build/release/bin/cosmos-chat
model="${COSMOS_MODEL:-$HOME/models/Cosmos-Reason1-7B}"
args=()
if [ -f "$model/config.json" ]; then
  args+=(--model "$model")
else
  echo "No model at $model (set COSMOS_MODEL=DIR, see README): the app opens on its welcome page."
fi
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  echo "No display (DISPLAY / WAYLAND_DISPLAY unset): starting the app under xvfb-run, invisible." >&2
  echo "Run it from a desktop session to see it, or use cosmos-cli (build/release/bin/cosmos-cli)." >&2
  exec xvfb-run -a "$app" "${args[@]}" "$@"
fi
exec "$app" "${args[@]}" "$@"
