#!/usr/bin/env bash
# End-to-end test of start-up on a damaged conversation database. The real cosmos-chat runs under
# Xvfb (no model needed) with temporary XDG folders, twice:
#   1. garbage: 64 KiB of random bytes where conversations.sqlite belongs;
#   2. truncated: a real database (made by the app, then holding 40 conversations of 4 messages)
#      cut to half its size.
# Each time the app must start and stay up, move the bad file aside as
# conversations.sqlite.corrupt-YYYYMMDD-HHMMSS with exactly the bytes it had (nothing deleted),
# create a fresh database (integrity_check ok, the app's tables, no conversations, `cosmos-cli
# conversations` reads it and refuses the moved file as damaged) and tell the
# user: the log says where the file went, and the warning banner (recoveryNotice) is on screen.
# Then it must quit cleanly.
#
#   e2e_corrupt_db.sh COSMOS_CHAT COSMOS_CLI OUT_DIR
#
# OUT_DIR receives e2e-corrupt-garbage.png and e2e-corrupt-truncated.png (the window with the
# notice) and, on a failure, the app's log and a screenshot. Exit codes: 0 passed, 1 failed,
# 77 skipped.
set -uo pipefail

app=${1:?usage: e2e_corrupt_db.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}
cli=${2:?usage: e2e_corrupt_db.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}
out=${3:?usage: e2e_corrupt_db.sh COSMOS_CHAT COSMOS_CLI OUT_DIR}
name=e2e-corrupt
needs_model=0
# shellcheck source=e2e_lib.sh
. "$(dirname "$0")/e2e_lib.sh"

command -v convert >/dev/null || skip "convert (ImageMagick) is not installed (packaging/setup.sh installs it)"
e2e_init
printf '[appearance]\ntheme=light\n' >"$conf"
mkdir -p "$(dirname "$db")"

# Pixels of the light theme's warning banner background (Theme.warningBackground) in a screenshot.
banner_pixels() {
  convert "$1" -fill black +opaque "#fff6db" -fill white -opaque "#fff6db" -format "%[fx:round(mean*w*h)]" info: 2>/dev/null
}

# Starts the app on the damaged $db (sha256 $1, case $2) and checks the recovery.
check_recovery() {
  local bad_sha=$1 case=$2
  local before
  before=$(grep -c "is damaged" "$log" 2>/dev/null)
  damaged_logged() { [ "$(grep -c "is damaged" "$log" 2>/dev/null)" -gt "${before:-0}" ]; }
  start_app "$case"
  wait_for 20 damaged_logged || fail "$case: the log does not report the damaged database; log: $(tail -n 5 "$log" 2>/dev/null)"
  sleep 2
  app_alive || fail "$case: the app did not stay up"
  # The damaged file, moved aside with its bytes.
  local moved="" f
  for f in "$db".corrupt-*; do
    case "$f" in *-wal|*-shm|*-journal) continue ;; esac
    [ -f "$f" ] && [ "$(sha256sum <"$f")" = "$bad_sha" ] && moved=$f
  done
  [ -n "$moved" ] || fail "$case: no $db.corrupt-* file with the damaged bytes; files: $(ls -l "$(dirname "$db")")"
  [[ "$(basename "$moved")" =~ ^conversations\.sqlite\.corrupt-[0-9]{8}-[0-9]{6}(-[0-9]+)?$ ]] \
    || fail "$case: unexpected name for the moved file: $moved"
  # The notice: the log names the new place, the window shows the banner.
  grep "is damaged" "$log" | tail -n1 | grep -qF "moved to $moved" \
    || fail "$case: the log does not say where the file went: $(grep "is damaged" "$log" | tail -n1)"
  # A fresh database.
  [ -f "$db" ] || fail "$case: no fresh database at $db"
  local check
  check=$(sqlite3 -readonly "file:$db?mode=ro" "PRAGMA integrity_check;" 2>&1)
  [ "$check" = ok ] || fail "$case: the fresh database fails integrity_check: $check"
  [ "$(sql "SELECT count(*) FROM conversations;")" = 0 ] \
    || fail "$case: the fresh database is not empty (or lacks the conversations table): $(sql "SELECT count(*) FROM conversations;")"
  { "$cli" conversations --db "$db" >"$tmp/cli.out" 2>&1 && grep -qx "0 conversations" "$tmp/cli.out"; } \
    || fail "$case: cosmos-cli conversations does not read the fresh database: $(cat "$tmp/cli.out")"
  # The moved file is still the damaged one: the CLI refuses it with a reason (exit code 1).
  "$cli" conversations --db "$moved" >"$tmp/cli.out" 2>&1
  local rc=$?
  { [ "$rc" = 1 ] && grep -q "damaged" "$tmp/cli.out"; } \
    || fail "$case: cosmos-cli conversations on the moved file: exit code $rc (want 1, damaged): $(cat "$tmp/cli.out")"
  say "$case: started; the bad file is kept as $(basename "$moved"); a fresh database is in place"
  screenshot "$case"
  local pixels
  pixels=$(banner_pixels "$out/$name-$case.png")
  [ "${pixels:-0}" -gt 2000 ] \
    || fail "$case: no warning banner on screen (${pixels:-?} pixels of its color) — the recovery notice is not shown"
  say "$case: the log says where the file went ($(basename "$moved")) and the warning banner is on screen"
  quit_app
}

# --- 1. garbage ---
head -c 65536 /dev/urandom >"$db"
check_recovery "$(sha256sum <"$db")" garbage

# --- 2. a truncated real database ---
# The fresh database the app just made (its real schema), filled with conversations.
rows=$(sqlite3 "$db" "
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40)
  INSERT INTO conversations(title, created_at, updated_at) SELECT 'Conversation ' || i, 1700000000000 + i, 1700000000000 + i FROM n;
  WITH RECURSIVE m(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM m WHERE j < 3)
  INSERT INTO messages(conversation_id, role, content, created_at)
    SELECT c.id, CASE WHEN m.j % 2 = 0 THEN 'user' ELSE 'assistant' END,
           'Message ' || m.j || ' of ' || c.title || ': ' || hex(randomblob(600)), c.created_at + m.j
    FROM conversations c, m ORDER BY c.id, m.j;
  PRAGMA wal_checkpoint(TRUNCATE);
  SELECT count(*) FROM messages;" 2>&1 | tail -n1)
[ "$rows" = 160 ] || fail "could not fill the database for the truncation case: $rows"
rm -f "$db-wal" "$db-shm"
size=$(stat -c %s "$db")
truncate -s $((size / 2)) "$db"
say "truncated: a real database of $size bytes (40 conversations, 160 messages) cut to $((size / 2))"
check_recovery "$(sha256sum <"$db")" truncated

if grep "qrc:/CosmosChat/" "$tmp"/app-*.out >"$tmp/qml-errors"; then
  fail "QML errors: $(cat "$tmp/qml-errors")"
fi
say "PASSED"
