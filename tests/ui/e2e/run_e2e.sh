#!/usr/bin/env bash
# End-to-end test of the desktop app: the real cosmos-chat on the tiny test model under Xvfb,
# driven with xdotool like a person would. It types a two-line question (Shift+Enter between the
# lines), presses Enter, waits until the conversation database holds the question and the finished
# reply, takes a screenshot, then quits with Ctrl+Q and expects a clean exit.
#
#   run_e2e.sh COSMOS_CHAT COSMOS_CLI OUT_DIR
#
# OUT_DIR receives e2e-chat.png (the window after the reply) and cosmos-chat.log. Exit codes:
# 0 passed, 1 failed, 77 skipped (no Xvfb / xdotool / ImageMagick / sqlite3 / test tokenizer).
set -uo pipefail

app=${1:?usage: run_e2e.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}
cli=${2:?usage: run_e2e.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}
out=${3:?usage: run_e2e.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}

skip() { echo "e2e: SKIPPED: $*"; exit 77; }
fail() {
  echo "e2e: FAILED: $*" >&2
  [ -f "$tmp/data/cosmos-chat/cosmos.log" ] && cp "$tmp/data/cosmos-chat/cosmos.log" "$out/cosmos-chat.log"
  echo "--- app output (last 40 lines) ---" >&2
  tail -n 40 "$tmp/app.out" >&2 2>/dev/null
  [ -n "${DISPLAY:-}" ] && import -window root "$out/e2e-failure.png" 2>/dev/null && echo "e2e: screenshot $out/e2e-failure.png" >&2
  exit 1
}
for tool in Xvfb xdotool import sqlite3; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (packaging/setup.sh installs it)"
done

tokenizer=${COSMOS_TEST_TOKENIZER:-${COSMOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cosmos-chat}/test-tokenizer/tokenizer.json}
[ -f "$tokenizer" ] || skip "no test tokenizer at $tokenizer (packaging/setup.sh fetches it)"

mkdir -p "$out"
rm -f "$out/e2e-chat.png" "$out/e2e-failure.png" "$out/cosmos-chat.log"
tmp=$(mktemp -d)
xvfb_pid=""
app_pid=""
cleanup() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# Polls `$@` every 0.2 s until it succeeds or `limit` seconds pass.
wait_for() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}

# --- the model and the app's folders ---
"$cli" make-test-model --preset tiny --seed 1 --shards 1 --out "$tmp/tiny" >"$tmp/make.out" 2>&1 \
  || { cat "$tmp/make.out" >&2; fail "make-test-model failed"; }
export XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="$tmp/cache" XDG_STATE_HOME="$tmp/state"
export XDG_RUNTIME_DIR="$tmp/runtime"
mkdir -p "$XDG_CONFIG_HOME/cosmos-chat" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
# Short, reproducible replies (the tiny model writes random text until the token limit).
cat >"$XDG_CONFIG_HOME/cosmos-chat/cosmos-chat.conf" <<'EOF'
[sampling]
maxNewTokens=48
seed=1
[appearance]
theme=light
EOF
db="$XDG_DATA_HOME/cosmos-chat/conversations.sqlite"
log="$XDG_DATA_HOME/cosmos-chat/cosmos.log"

# --- an X server on a free display ---
exec 3>"$tmp/display"
Xvfb -displayfd 3 -screen 0 1400x900x24 -nolisten tcp >"$tmp/xvfb.out" 2>&1 &
xvfb_pid=$!
exec 3>&-
wait_for 20 test -s "$tmp/display" || fail "Xvfb did not start: $(cat "$tmp/xvfb.out")"
export DISPLAY=":$(head -n1 "$tmp/display")"
echo "e2e: Xvfb on $DISPLAY"

# --- the app ---
QT_QPA_PLATFORM=xcb "$app" --model "$tmp/tiny" >"$tmp/app.out" 2>&1 &
app_pid=$!
window_up() { xdotool search --name "Cosmos Chat" >/dev/null 2>&1; }
wait_for 60 window_up || fail "no window appeared"
wait_for 120 grep -q "app: loaded" "$log" 2>/dev/null || fail "the model did not load"
echo "e2e: window up, model loaded"
win=$(xdotool search --name "Cosmos Chat" | head -n1)
eval "$(xdotool getwindowgeometry --shell "$win")"   # WIDTH, HEIGHT
# The composer: under the messages, between the sidebar (265 px) and the live panel (301 px).
cx=$(( 265 + (WIDTH - 265 - 301) / 2 ))
cy=$(( HEIGHT - 50 ))
xdotool mousemove --window "$win" "$cx" "$cy" click 1
xdotool windowfocus "$win" 2>/dev/null
question1="Is the robot about to drop the cup?"
question2="Answer in one line."
xdotool type --delay 15 "$question1"
xdotool key shift+Return
xdotool type --delay 15 "$question2"
xdotool key Return

# --- the database shows the question and the finished reply ---
sql() { sqlite3 -readonly "file:$db?mode=ro" "$1" 2>/dev/null; }
expected_user="$question1"$'\n'"$question2"
user_saved() { [ "$(sql "SELECT content FROM messages WHERE role='user' ORDER BY id LIMIT 1;")" = "$expected_user" ]; }
reply_done() {
  [ "$(sql "SELECT count(*) FROM messages WHERE role='assistant'
            AND json_extract(meta_json, '$.stats.generated_tokens') > 0
            AND json_extract(meta_json, '$.streaming') IS NULL;")" = 1 ]
}
wait_for 60 test -f "$db" || fail "no database at $db"
wait_for 30 user_saved || fail "the question was not saved as typed; messages: $(sql "SELECT id, role, quote(content) FROM messages;")"
echo "e2e: the question is saved (two lines: Shift+Enter made a new line, Enter sent)"
wait_for 180 reply_done || fail "no finished reply in the database; messages: $(sql "SELECT id, role, length(content), meta_json FROM messages;")"
tokens=$(sql "SELECT json_extract(meta_json, '$.stats.generated_tokens') FROM messages WHERE role='assistant';")
conv=$(sql "SELECT count(*) FROM conversations WHERE deleted = 0;")
[ "$conv" = 1 ] || fail "expected 1 conversation, found $conv"
title=$(sql "SELECT title FROM conversations;")
echo "e2e: reply saved ($tokens tokens) in conversation \"$title\""
"$cli" conversations --db "$db" --json >"$tmp/conversations.json" 2>/dev/null \
  && echo "e2e: cosmos-cli conversations lists $(grep -c '"id"' "$tmp/conversations.json") conversation(s)"

# --- the screenshot (after the frame that shows the finished reply is drawn) ---
sleep 0.5
import -window "$win" "$out/e2e-chat.png" || fail "the screenshot failed"
echo "e2e: screenshot $out/e2e-chat.png"

# --- a clean exit ---
xdotool key --window "$win" ctrl+q
app_exited() { ! kill -0 "$app_pid" 2>/dev/null; }
wait_for 20 app_exited || fail "the app did not quit on Ctrl+Q"
wait "$app_pid"
rc=$?
app_pid=""
cp "$log" "$out/cosmos-chat.log" 2>/dev/null
[ "$rc" = 0 ] || fail "the app exited with $rc"
if grep "qrc:/CosmosChat/" "$tmp/app.out" >"$tmp/qml-errors"; then
  fail "QML errors: $(cat "$tmp/qml-errors")"
fi
echo "e2e: PASSED"
