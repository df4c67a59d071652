#!/usr/bin/env bash
# Sets everything up, builds the release, and starts Cosmos Chat on a working default.
# Until the desktop app lands, "the app" is cosmos-cli: it inspects the model folder given in
# $COSMOS_MODEL (default ~/models/Cosmos-Reason1-7B) or, when there is none, a tiny test model it
# makes, and shows how a chat turn is tokenized.
set -euo pipefail
cd "$(dirname "$0")/.."
packaging/setup.sh
cmake --workflow --preset release
cli=build/release/bin/cosmos-cli
model="${COSMOS_MODEL:-$HOME/models/Cosmos-Reason1-7B}"
if [ ! -f "$model/config.json" ]; then
  cache="${COSMOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cosmos-chat}"
  echo "No model at $model (set COSMOS_MODEL=DIR, see README): using a tiny test model instead."
  model="$cache/tiny-test-model"
  [ -f "$model/config.json" ] || "$cli" make-test-model --preset tiny --seed 1 --out "$model"
fi
"$cli" inspect --model "$model"
echo
echo "A chat turn in the model's format:"
echo '[{"role":"user","content":"Is the robot about to drop the cup?"}]' | "$cli" chat-prompt --model "$model" --messages -
