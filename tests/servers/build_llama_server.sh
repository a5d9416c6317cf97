#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the llama.cpp source that ships inside the
# llama-cpp-python sdist on PyPI, and cache it outside the clone (every clone and CI run on
# the machine shares one build): $DECODESCOPE_CACHE, else ~/.cache/decodescope, /llama-server.
# A second run with the binary present does nothing. Needs cmake and a C++ compiler;
# takes ~7 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${DECODESCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/decodescope}/llama-server"
BIN="$CACHE/bin/llama-server"
if [[ -x "$BIN" ]]; then echo "llama-server cached: $BIN"; exit 0; fi
mkdir -p "$CACHE/src"
if [[ ! -d "$CACHE/src/llama_cpp_python-$VERSION" ]]; then
  python -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$CACHE/src"
  tar -xzf "$CACHE/src/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE/src"
fi
SRC="$CACHE/src/llama_cpp_python-$VERSION/vendor/llama.cpp"
cmake -S "$SRC" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DBUILD_SHARED_LIBS=OFF
cmake --build "$CACHE/build" --target llama-server -j"${JOBS:-2}"
mkdir -p "$CACHE/bin"
cp "$CACHE/build/bin/llama-server" "$BIN"
# gguf-py (the GGUF writer of this llama.cpp version) makes the test's tiny model
cp -r "$SRC/gguf-py" "$CACHE/"
echo "llama-server built: $BIN"
