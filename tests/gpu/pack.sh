#!/usr/bin/env bash
# Runs HERE (the development machine): builds the engine, cosmos-cli and the tests with CUDA and
# without Qt (preset "gpu"), and packs the binaries, the Debian shared libraries they need that
# Ubuntu 24.04 lacks, libcosmos-engine.so and the CUDA backend module libcosmos-cuda.so, and the
# test tokenizer into .carry/ (git-ignored) for the GPU machine:
#   tests/gpu/pack.sh && <device run, carry [".carry_pack"]>
#     tar -xJf .carry_pack/carry.tar.xz && tests/gpu/run.sh --prebuilt .carry
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake --preset gpu >/dev/null
cmake --build --preset gpu
rm -rf .carry && mkdir -p .carry/bin .carry/lib
cp build/gpu/bin/* .carry/bin/
# The engine library and the CUDA backend module: the binaries find them in .carry/bin/../lib
# (RUNPATH $ORIGIN/../lib; the module is also searched there). cuBLASLt comes from the GPU machine's
# own CUDA install, not from here.
cp build/gpu/lib/libcosmos-engine.so build/gpu/lib/libcosmos-cuda.so .carry/lib/
# COSMOS_PACK_KTRACE=1: also the module built with per-block timestamps (kernels/ktrace.cuh), for
# tests/gpu/run.sh --ktrace (a build directory of its own; ~1 min from ccache).
if [ "${COSMOS_PACK_KTRACE:-0}" = 1 ]; then
  cmake --preset gpu -B build/gpu-ktrace -DCOSMOS_KTRACE=ON >/dev/null
  cmake --build build/gpu-ktrace --target cosmos_cuda
  mkdir -p .carry/lib/ktrace && cp build/gpu-ktrace/lib/libcosmos-cuda.so .carry/lib/ktrace/
fi
# Libraries from Debian packages that the GPU machine does not have.
for bin in .carry/bin/* .carry/lib/libcosmos-*.so; do
  ldd "$bin" | awk '/=> \//{print $3}'
done | sort -u | grep -E 'libspdlog|libfmt|libutf8proc|libsentencepiece|libprotobuf|libpcre2|libxxhash' \
  | xargs -r -I{} cp -L {} .carry/lib/
# Symbols off: the device call carries at most 64 MiB with the source tree.
strip --strip-unneeded .carry/bin/* .carry/lib/libcosmos-*.so
if [ -d .carry/lib/ktrace ]; then strip --strip-unneeded .carry/lib/ktrace/*.so; fi
tok="${COSMOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cosmos-chat}/test-tokenizer/tokenizer.json"
cp "$tok" .carry/tokenizer.json
# Where the binaries were built, so run.sh can recreate the compiled-in paths there.
echo "$PWD" > .carry/source_dir
echo "$tok" > .carry/tokenizer_path
# The device call carries at most 64 MiB with the source tree, which .carry alone nearly fills: a
# compressed copy travels instead; unpack it there first:
#   carry [".carry_pack"], command: tar -xJf .carry_pack/carry.tar.xz && tests/gpu/run.sh --prebuilt .carry ...
# xz -9's 64 MiB dictionary finds the device code that several binaries share (the kernels each test
# links), which the default level's 8 MiB dictionary packs once per binary.
rm -rf .carry_pack && mkdir -p .carry_pack && tar -cf - .carry | xz -9 -T1 > .carry_pack/carry.tar.xz
du -sh .carry .carry_pack
