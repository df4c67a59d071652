#!/usr/bin/env bash
# End-to-end "nothing lost" test: kill -9 while a reply streams. The real cosmos-chat runs under
# Xvfb on the tiny test model (random weights on the CPU: a long reply of random text) with
# temporary XDG folders. xdotool types a question and presses Enter; once the reply has been
# streaming (and saved to the database) for 2.5 s the app is killed with SIGKILL. Then:
#   - the database holds the question and the reply, still marked streaming, with non-empty text
#     that is at least what the database showed before the kill (the last save is at most ~1 s
#     old: ChatViewModel::kSaveIntervalMs), readable by sqlite3 and `cosmos-cli conversations`;
#   - `PRAGMA integrity_check` says ok;
#   - the app starts again on the same folders: no recovery (nothing moved aside), it stays up,
#     the conversation is in the sidebar and opens (the window title becomes its title), and it
#     quits cleanly; the database is still intact and still holds the saved reply.
#
#   e2e_kill_streaming.sh COSMOS_CHAT COSMOS_CLI OUT_DIR
#
# OUT_DIR receives e2e-kill-restarted.png (the reopened conversation after the restart) and, on a
# failure, the app's log and a screenshot. Exit codes: 0 passed, 1 failed, 77 skipped.
set -uo pipefail

app=${1:?usage: e2e_kill_streaming.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}
cli=${2:?usage: e2e_kill_streaming.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}
out=${3:?usage: e2e_kill_streaming.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}
name=e2e-kill
# shellcheck source=e2e_lib.sh
. "$(dirname "$0")/e2e_lib.sh"

stream_for_ms=2500   # how long the reply streams before the kill
max_age_ms=2000      # the newest save may be this old at the kill (1 s interval + a loaded machine)

e2e_init
"$cli" make-test-model --preset tiny --seed 1 --shards 1 --out "$tmp/tiny" >"$tmp/make.out" 2>&1 \
  || { cat "$tmp/make.out" >&2; fail "make-test-model failed"; }
# A long reply: the tiny model writes random text (about 70 tokens/s on two cores) until the limit,
# so 2000 tokens stream for far longer than the test waits.
cat >"$conf" <<'EOF'
[sampling]
maxNewTokens=2000
seed=1
[appearance]
theme=light
EOF

# --- first run: ask, let the reply stream, kill -9 ---
start_app first --model "$tmp/tiny"
wait_for 120 grep -q "app: loaded" "$log" 2>/dev/null || fail "the model did not load"
say "window up, model loaded"
# The composer: under the messages, between the sidebar (265 px) and the live panel (301 px).
xdotool mousemove --window "$win" $(( 265 + (WIDTH - 265 - 301) / 2 )) $(( HEIGHT - 50 )) click 1
xdotool windowfocus "$win" 2>/dev/null
question="Will the reply survive a crash?"
xdotool type --delay 15 "$question"
xdotool key Return

user_saved() { [ "$(sql "SELECT content FROM messages WHERE role='user' ORDER BY id LIMIT 1;")" = "$question" ]; }
wait_for 30 user_saved || fail "the question was not saved as typed; messages: $(sql "SELECT id, role, quote(content) FROM messages;")"
# The reply as saved: "streaming-flag|length of the raw text|length of content|length of reasoning".
reply_q="SELECT coalesce(json_extract(meta_json, '\$.streaming'), 0) || '|' ||
                length(coalesce(json_extract(meta_json, '\$.raw'), '')) || '|' ||
                length(content) || '|' || length(reasoning)
         FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1;"
raw_hex_q="SELECT hex(coalesce(json_extract(meta_json, '\$.raw'), '')) FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1;"
state=""
first_save() { state=$(sql "$reply_q"); [[ "$state" =~ ^1\|[1-9] ]]; }
wait_for 60 first_save || fail "no reply text was saved while streaming; the reply row: '$state' (want streaming=1 and text)"
t_first=$(now_ms)
say "the reply is streaming and saved (streaming|raw|content|reasoning chars: $state)"

# Watch the saves until the reply has streamed for stream_for_ms, noting when the text last grew.
last_len=${state#*|}; last_len=${last_len%%|*}
t_change=$t_first
saves=1
while [ $(( $(now_ms) - t_first )) -lt $stream_for_ms ]; do
  app_alive || fail "the app died while streaming"
  state=$(sql "$reply_q")
  [[ "$state" =~ ^1\| ]] || fail "the reply finished (or lost its streaming mark) before the kill: '$state'; make replies longer"
  len=${state#*|}; len=${len%%|*}
  if [ "$len" != "$last_len" ]; then
    [ "$len" -gt "$last_len" ] || fail "the saved reply shrank while streaming ($last_len -> $len chars)"
    last_len=$len
    t_change=$(now_ms)
    saves=$((saves + 1))
  fi
  sleep 0.1
done
last_hex=$(sql "$raw_hex_q")
[ "$saves" -ge 2 ] || fail "only one save seen in $stream_for_ms ms of streaming (want one at least every second)"
kill -9 "$app_pid"
t_kill=$(now_ms)
wait "$app_pid" 2>/dev/null
app_pid=""
say "killed (SIGKILL) after $(( t_kill - t_first )) ms of streaming; $saves saves seen, the last at $last_len chars, $(( t_kill - t_change )) ms before the kill"

# --- after the kill: the reply is there ---
[ "$(sql "SELECT count(*) FROM conversations WHERE deleted = 0;")" = 1 ] || fail "expected 1 conversation after the kill, found $(sql "SELECT count(*) FROM conversations;")"
user_saved || fail "the question is missing after the kill"
state=$(sql "$reply_q")
[ -n "$state" ] || fail "no assistant message after the kill; messages: $(sql "SELECT id, role, length(content), meta_json FROM messages;")"
IFS='|' read -r streaming raw_len content_len reasoning_len <<<"$state"
[ "$streaming" = 1 ] || fail "the reply is not marked streaming after the kill ('$state'): the kill did not land mid-reply"
[ $(( content_len + reasoning_len )) -gt 0 ] || fail "the reply's text is empty after the kill ('$state')"
[ "$raw_len" -ge "$last_len" ] || fail "the reply lost text: $last_len chars were saved before the kill, $raw_len after"
final_hex=$(sql "$raw_hex_q")
[ "${final_hex:0:${#last_hex}}" = "$last_hex" ] || fail "the reply after the kill does not begin with the text saved before it"
if [ "$raw_len" -gt "$last_len" ]; then age_ms=100; else age_ms=$(( t_kill - t_change )); fi  # a save after the last look
[ "$age_ms" -le $max_age_ms ] || fail "the newest save was ${age_ms} ms old at the kill (the app saves every 1000 ms; allowed $max_age_ms)"
say "after the kill: the reply is saved with $content_len chars of answer, $reasoning_len of reasoning ($raw_len raw), at most ~${age_ms} ms old"

check=$(sqlite3 -readonly "file:$db?mode=ro" "PRAGMA integrity_check;" 2>&1)
[ "$check" = ok ] || fail "PRAGMA integrity_check after the kill: $check"
"$cli" conversations --db "$db" --json >"$tmp/conversations.json" 2>"$tmp/conversations.err" \
  || fail "cosmos-cli conversations --db failed after the kill: $(cat "$tmp/conversations.err")"
grep -q '"message_count": 2' "$tmp/conversations.json" \
  || fail "cosmos-cli conversations does not list the conversation with 2 messages: $(cat "$tmp/conversations.json")"
title=$(sql "SELECT title FROM conversations WHERE deleted = 0;")
say "integrity_check ok; cosmos-cli conversations lists \"$title\" with 2 messages"

# --- second run on the same folders ---
start_app second --model "$tmp/tiny"
sleep 3
app_alive || fail "the app did not stay up after the restart"
grep -q "is damaged" "$log" && fail "the app treated the database as damaged after the kill: $(grep "is damaged" "$log")"
ls "$db".corrupt-* >/dev/null 2>&1 && fail "the database was moved aside after the kill: $(ls "$db".corrupt-*)"
# The sidebar's first conversation (below its header and the search field): opening it sets the
# window title to "<title> — Cosmos Chat".
opened() { xdotool getwindowname "$win" 2>/dev/null | grep -qF "$title — Cosmos Chat"; }
for y in 80 100 120 140 160; do
  xdotool mousemove --window "$win" 120 "$y" click 1
  wait_for 2 opened && break
done
opened || fail "the conversation \"$title\" did not open from the sidebar after the restart (window title: $(xdotool getwindowname "$win"))"
say "restarted: the app is up and opens \"$title\" from the sidebar"
screenshot restarted
quit_app
check=$(sqlite3 -readonly "file:$db?mode=ro" "PRAGMA integrity_check;" 2>&1)
[ "$check" = ok ] || fail "PRAGMA integrity_check after the restart: $check"
state=$(sql "$reply_q")
IFS='|' read -r _ raw_after _ _ <<<"$state"
[ "${raw_after:-0}" -ge "$raw_len" ] || fail "the reply lost text across the restart ($raw_len -> ${raw_after:-0} chars)"
if grep "qrc:/CosmosChat/" "$tmp"/app-*.out >"$tmp/qml-errors"; then
  fail "QML errors: $(cat "$tmp/qml-errors")"
fi
say "PASSED"
