# Shared helpers of the end-to-end scripts that start the real cosmos-chat under Xvfb
# (e2e_kill_streaming.sh, e2e_corrupt_db.sh). Source it after setting `name` (the prefix of every
# line), `out` (the folder for logs and screenshots) and, for a run without a model, needs_model=0
# (then no test tokenizer is needed), then call e2e_init.
#
# e2e_init makes a temporary folder $tmp with isolated XDG_* folders (the app's database
# $db = $XDG_DATA_HOME/cosmos-chat/conversations.sqlite, its log $log, its settings $conf), starts
# Xvfb on a free display (-displayfd, so tests running at the same time never share one) and
# exports DISPLAY. Exit codes: 0 passed, 1 failed, 77 skipped (a missing tool or test tokenizer).

# shellcheck shell=bash
app_pid=""
xvfb_pid=""
tmp=""

say() { echo "$name: $*"; }
skip() { echo "$name: SKIPPED: $*"; exit 77; }
fail() {
  echo "$name: FAILED: $*" >&2
  if [ -n "$tmp" ]; then
    [ -f "${log:-}" ] && cp "$log" "$out/$name-cosmos-chat.log" && echo "$name: app log $out/$name-cosmos-chat.log" >&2
    for f in "$tmp"/app*.out; do
      [ -f "$f" ] || continue
      echo "--- $(basename "$f") (last 30 lines) ---" >&2
      tail -n 30 "$f" >&2
    done
  fi
  [ -n "${DISPLAY:-}" ] && import -window root "$out/$name-failure.png" 2>/dev/null \
    && echo "$name: screenshot $out/$name-failure.png" >&2
  exit 1
}

e2e_cleanup() {
  [ -n "$app_pid" ] && kill -9 "$app_pid" 2>/dev/null
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null
  wait 2>/dev/null
  [ -n "$tmp" ] && rm -rf "$tmp"
}

# Polls `$@` every 0.1 s until it succeeds or `limit` seconds pass.
wait_for() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -ge "$deadline" ] && return 1
    sleep 0.1
  done
}

now_ms() { date +%s%3N; }

# A read-only query of the app's database (the app may hold it open; WAL lets both read).
sql() { sqlite3 -readonly "file:$db?mode=ro" "$1" 2>/dev/null; }

e2e_init() {
  for tool in Xvfb xdotool import sqlite3; do
    command -v "$tool" >/dev/null || skip "$tool is not installed (packaging/setup.sh installs it)"
  done
  if [ "${needs_model:-1}" = 1 ]; then
    tokenizer=${COSMOS_TEST_TOKENIZER:-${COSMOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cosmos-chat}/test-tokenizer/tokenizer.json}
    [ -f "$tokenizer" ] || skip "no test tokenizer at $tokenizer (packaging/setup.sh fetches it)"
    # make-test-model finds it there once XDG_CACHE_HOME moves.
    export COSMOS_TEST_TOKENIZER="$tokenizer"
  fi
  mkdir -p "$out"
  rm -f "$out/$name"-*
  tmp=$(mktemp -d)
  trap e2e_cleanup EXIT
  export XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="$tmp/cache" XDG_STATE_HOME="$tmp/state"
  export XDG_RUNTIME_DIR="$tmp/runtime"
  mkdir -p "$XDG_CONFIG_HOME/cosmos-chat" "$XDG_DATA_HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
  conf="$XDG_CONFIG_HOME/cosmos-chat/cosmos-chat.conf"
  db="$XDG_DATA_HOME/cosmos-chat/conversations.sqlite"
  log="$XDG_DATA_HOME/cosmos-chat/cosmos.log"

  exec 3>"$tmp/display"
  Xvfb -displayfd 3 -screen 0 1400x900x24 -nolisten tcp >"$tmp/xvfb.out" 2>&1 &
  xvfb_pid=$!
  exec 3>&-
  wait_for 20 test -s "$tmp/display" || fail "Xvfb did not start: $(cat "$tmp/xvfb.out")"
  export DISPLAY=":$(head -n1 "$tmp/display")"
  say "Xvfb on $DISPLAY"
}

# Starts the app (extra arguments are passed on); its output goes to $tmp/app-TAG.out. Sets
# app_pid and, once its window is up, win, WIDTH and HEIGHT.
start_app() {
  local tag=$1; shift
  QT_QPA_PLATFORM=xcb "$app" "$@" >"$tmp/app-$tag.out" 2>&1 &
  app_pid=$!
  wait_for 60 window_up || fail "no window appeared after starting the app ($tag)"
  win=$(xdotool search --pid "$app_pid" --name "Cosmos Chat" 2>/dev/null | head -n1)
  [ -n "$win" ] || win=$(xdotool search --name "Cosmos Chat" | head -n1)
  eval "$(xdotool getwindowgeometry --shell "$win")"   # WIDTH, HEIGHT
}
window_up() {
  kill -0 "$app_pid" 2>/dev/null || fail "the app exited at start-up"
  xdotool search --pid "$app_pid" --name "Cosmos Chat" >/dev/null 2>&1
}
app_alive() { [ -n "$app_pid" ] && kill -0 "$app_pid" 2>/dev/null; }
app_exited() { ! kill -0 "$app_pid" 2>/dev/null; }

# Ctrl+Q, then a clean exit within 20 s.
quit_app() {
  xdotool key --window "$win" ctrl+q 2>/dev/null  # BadWindow when the window closes before the key-up
  wait_for 20 app_exited || fail "the app did not quit on Ctrl+Q"
  wait "$app_pid"
  local rc=$?
  app_pid=""
  [ "$rc" = 0 ] || fail "the app exited with $rc"
}

# Window screenshot to $out/$name-WHAT.png (after the current frame is drawn).
screenshot() {
  sleep 0.5
  import -window "$win" "$out/$name-$1.png" || fail "the screenshot failed"
  say "screenshot $out/$name-$1.png"
}
