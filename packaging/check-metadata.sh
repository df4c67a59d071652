#!/usr/bin/env bash
# Validates the desktop entry and the AppStream metadata (the packaging_metadata test, and
# packaging/test-package.sh on the installed files):
#   packaging/check-metadata.sh DESKTOP_FILE METAINFO_FILE [VERSION]
# VERSION: the newest <release> in the metadata must be this one.
# Needs desktop-file-validate (desktop-file-utils) and appstreamcli (appstream): packaging/setup.sh.
set -euo pipefail
desktop=$1 metainfo=$2 version=${3:-}
for tool in desktop-file-validate appstreamcli; do
  command -v "$tool" >/dev/null || { echo "check-metadata: $tool is missing: run packaging/setup.sh" >&2; exit 1; }
done
# desktop-file-validate exits 0 on hints; treat any output (errors, warnings, hints) as a failure.
out=$(desktop-file-validate "$desktop" 2>&1) || { echo "$out" >&2; exit 1; }
[ -z "$out" ] || { echo "$out" >&2; echo "check-metadata: desktop-file-validate complained" >&2; exit 1; }
echo "desktop-file-validate $(basename "$desktop"): OK"
appstreamcli validate --no-net "$metainfo"
if [ -n "$version" ]; then
  newest=$(grep -o '<release [^>]*version="[^"]*"' "$metainfo" | head -1 | sed 's/.*version="\([^"]*\)"/\1/')
  [ "$newest" = "$version" ] || {
    echo "check-metadata: the newest <release> in $metainfo is '$newest', the project is $version" >&2; exit 1; }
  echo "newest release $newest = project version: OK"
fi
