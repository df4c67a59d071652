#!/usr/bin/env bash
# Makes the Debian package from a build tree that is already built and tests it as installed.
#
#   packaging/test-package.sh [BUILD_DIR]        # default build/ci (.ci/run calls it after the tests)
#
# 1. `cpack -G DEB` in BUILD_DIR: seconds on a built tree (it installs the built files into a staging
#    folder, strips them and runs dpkg-shlibdeps; it compiles nothing). The .deb stays in BUILD_DIR.
# 2. Checks the package: the files it must hold, Depends computed and satisfiable here
#    (dpkg-checkbuilddeps) with no CUDA or NVIDIA package in it, the CUDA Recommends, the RUNPATHs.
# 3. Unpacks it into a scratch root with `dpkg -x`: no root needed and no dpkg database touched, so
#    it works the same for a developer and for CI (which runs as root). For the files this is what
#    `dpkg -i` installs; what it skips are the maintainer scripts, which only run ldconfig (CPack
#    adds them for libraries under /usr/lib; the desktop and icon caches update through dpkg
#    triggers of desktop-file-utils and the icon theme). Then, with LD_LIBRARY_PATH unset, it
#    runs the installed programs from there: cosmos-chat --version, cosmos-cli --version,
#    make-test-model and a short CPU generation, and starts the app offscreen for a few seconds
#    (its QML loads; the Qt modules it needs are installed). Validates the installed desktop entry and
#    AppStream metadata.
# 4. Removes the scratch root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../build/ci}" && pwd)
id=io.github.cosmoschat.CosmosChat
start=$SECONDS
fail() { echo "test-package: FAIL: $*" >&2; exit 1; }
step() { echo "test-package: $*"; }
passed=0
ok() { passed=$((passed + 1)); }

# --- 1. the package ---
step "cpack -G DEB in $build"
rm -f "$build"/cosmos-chat_*.deb
(cd "$build" && cpack -G DEB > cpack.log 2>&1) || { cat "$build/cpack.log" >&2; fail "cpack failed"; }
rm -rf "$build/_CPack_Packages"  # the staging folder: a second copy of everything
deb=$(ls "$build"/cosmos-chat_*.deb)
ok
step "$(basename "$deb"): $(du -h "$deb" | cut -f1)"

# --- 2. its control fields and contents ---
field() { dpkg-deb -f "$deb" "$1"; }
depends=$(field Depends)
recommends=$(field Recommends)
echo "  Depends: $depends"
echo "  Recommends: $recommends"
[ -n "$depends" ] || fail "no Depends (dpkg-shlibdeps did not run?)"
echo "$depends" | grep -q 'libc6 (>=' || fail "Depends has no versioned libc6: not computed by dpkg-shlibdeps"
echo "$depends" | grep -q 'libqt6core6' || fail "Depends lacks Qt (libqt6core6)"
echo "$depends" | grep -Eiq 'cuda|cublas|nvidia' && fail "Depends names a CUDA/NVIDIA package: the package would not install on CPU-only machines"
ok
# Every dependency is a real Debian package, installed here in a version that satisfies it.
dpkg-checkbuilddeps -d "$depends" /dev/null || fail "Depends is not satisfied on this machine"
ok

dpkg-deb -c "$deb" > "$build/package-contents.txt"
has() { grep -q " \./$1\$" "$build/package-contents.txt" || fail "the package lacks /$1"; }
has usr/bin/cosmos-chat
has usr/bin/cosmos-cli
has usr/lib/cosmos-chat/libcosmos-engine.so
has usr/share/applications/$id.desktop
has usr/share/metainfo/$id.metainfo.xml
has usr/share/icons/hicolor/scalable/apps/$id.svg
for s in 16 24 32 48 64 128 256; do has "usr/share/icons/hicolor/${s}x${s}/apps/$id.png"; done
ok
cuda=0
if [ -f "$build/lib/libcosmos-cuda.so" ]; then
  cuda=1
  has usr/lib/cosmos-chat/libcosmos-cuda.so
  echo "$recommends" | grep -q 'libcublas-' || fail "the CUDA module is packaged but Recommends names no cuBLAS"
  echo "$recommends" | grep -q 'cuda-drivers' || fail "the CUDA module is packaged but Recommends names no driver"
  ok
fi
grep -q '/build/\|/work/' "$build/package-contents.txt" && fail "a build path leaked into the package"
ok

# --- 3. installed into a scratch root ---
root=$(mktemp -d "${TMPDIR:-/tmp}/cosmos-deb.XXXXXX")
trap 'rm -rf "$root"' EXIT
dpkg -x "$deb" "$root"
step "unpacked into $root"

runpath() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p'; }
[ "$(runpath "$root/usr/bin/cosmos-chat")" = '$ORIGIN/../lib/cosmos-chat' ] || fail "cosmos-chat RUNPATH: $(runpath "$root/usr/bin/cosmos-chat")"
[ "$(runpath "$root/usr/bin/cosmos-cli")" = '$ORIGIN/../lib/cosmos-chat' ] || fail "cosmos-cli RUNPATH: $(runpath "$root/usr/bin/cosmos-cli")"
[ -z "$(runpath "$root/usr/lib/cosmos-chat/libcosmos-engine.so")" ] || fail "libcosmos-engine.so has a RUNPATH"
if [ "$cuda" = 1 ]; then
  runpath "$root/usr/lib/cosmos-chat/libcosmos-cuda.so" | grep -q '^\$ORIGIN' || fail "libcosmos-cuda.so RUNPATH: $(runpath "$root/usr/lib/cosmos-chat/libcosmos-cuda.so")"
fi
for f in usr/bin/cosmos-chat usr/bin/cosmos-cli usr/lib/cosmos-chat/libcosmos-engine.so; do
  file "$root/$f" | grep -q 'not stripped' && fail "$f is not stripped"
done
ok
echo "  RUNPATHs: bin/* \$ORIGIN/../lib/cosmos-chat; libcosmos-engine.so none; libcosmos-cuda.so $( [ $cuda = 1 ] && runpath "$root/usr/lib/cosmos-chat/libcosmos-cuda.so" || echo '(not built)')"

# The installed programs, from the scratch root, with nothing pointing them at the build tree.
run() { env -u LD_LIBRARY_PATH -u COSMOS_CUDA_MODULE HOME="$root/home" XDG_CONFIG_HOME="$root/home/.config" \
          XDG_DATA_HOME="$root/home/.local/share" XDG_CACHE_HOME="$root/home/.cache" "$@"; }
mkdir -p "$root/home"
ldd_engine=$(run ldd "$root/usr/bin/cosmos-cli" | awk '/libcosmos-engine/ {print $3}')
[ "$(realpath "$ldd_engine")" = "$(realpath "$root/usr/lib/cosmos-chat/libcosmos-engine.so")" ] \
  || fail "cosmos-cli resolves the engine elsewhere: $ldd_engine"
ok

version=$(run "$root/usr/bin/cosmos-chat" --version)
echo "  cosmos-chat --version: $version"
echo "$version" | grep -Eq '^cosmos-chat [0-9]+\.[0-9]+\.[0-9]+' || fail "cosmos-chat --version printed '$version'"
ok
version=$(run "$root/usr/bin/cosmos-cli" --version)
echo "  cosmos-cli --version: $version"
echo "$version" | grep -Eq '[0-9]+\.[0-9]+\.[0-9]+' || fail "cosmos-cli --version printed '$version'"
ok

# The test model needs the test tokenizer (packaging/setup.sh fetches it; the CLI's default is the
# build's); $COSMOS_TEST_TOKENIZER overrides.
tok_args=()
[ -n "${COSMOS_TEST_TOKENIZER:-}" ] && tok_args=(--tokenizer "$COSMOS_TEST_TOKENIZER")
run "$root/usr/bin/cosmos-cli" make-test-model --preset tiny --seed 1 -q "${tok_args[@]}" --out "$root/tiny" \
  || fail "cosmos-cli make-test-model"
ok
out=$(run "$root/usr/bin/cosmos-cli" generate --model "$root/tiny" --device cpu --prompt "Hello" \
        --max-tokens 8 --temperature 0 --json 2> "$root/generate.err") \
  || { cat "$root/generate.err" >&2; fail "cosmos-cli generate --device cpu"; }
echo "$out" | grep -q '"token_ids"' || fail "cosmos-cli generate printed no JSON: $out"
ok
echo "  cosmos-cli generate --device cpu: $(echo "$out" | grep -o '"generated_tokens": *[0-9]*' || echo 'ok')"
# The CUDA module loads from the package (its cuBLASLt found) where the toolkit is installed; without
# a GPU the engine then says so and the CPU runs. Informational: where no toolkit is, it says why.
if [ "$cuda" = 1 ]; then
  auto=$(run "$root/usr/bin/cosmos-cli" generate --model "$root/tiny" --prompt "Hi" --max-tokens 1 2>&1 >/dev/null || true)
  echo "  --device auto: $(echo "$auto" | grep -im1 'cuda\|gpu\|device' || echo '(said nothing about the device)')"
fi

# The app starts from the package (Qt plugins and QML modules found) and keeps running.
set +e
run env QT_QPA_PLATFORM=offscreen timeout 6 "$root/usr/bin/cosmos-chat" > "$root/app.log" 2>&1
rc=$?
set -e
[ "$rc" = 124 ] || { cat "$root/app.log" >&2; fail "cosmos-chat exited ($rc) instead of running"; }
grep -Eiq 'cannot create|is not installed|module .* not found' "$root/app.log" \
  && { cat "$root/app.log" >&2; fail "cosmos-chat reported a QML problem"; }
echo "  cosmos-chat (offscreen): running after 6 s"
ok

bash "$here/check-metadata.sh" "$root/usr/share/applications/$id.desktop" "$root/usr/share/metainfo/$id.metainfo.xml"
ok
appstreamcli validate-tree --no-net "$root" || fail "appstreamcli validate-tree"
ok

echo "test-package: $(basename "$deb") checked in $((SECONDS - start)) s"
echo "test-package: $passed passed, 0 failed"
