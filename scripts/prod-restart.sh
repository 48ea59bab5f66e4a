#!/usr/bin/env bash
# Rolling restart of `make prod`'s web processes: one at a time, SIGTERM (it drains:
# agents reconnect to the others and resume), then wait until its successor is ready
# before the next. Run it after pulling new code (and `manage.py migrate`).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-.venv/bin}"
ready() { "$BIN/python" -c "import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" "$1" 2>/dev/null; }
for pidfile in "${GATEHOUSE_RUN_DIR:-var/prod}"/web-*.pid; do
  [ -e "$pidfile" ] || { echo "no web processes running (${GATEHOUSE_RUN_DIR:-var/prod}/web-*.pid)" >&2; exit 1; }
  old=$(cat "$pidfile")
  port=$(tr '\0' ' ' <"/proc/$old/cmdline" | sed -E 's/.* -p ([0-9]+) .*/\1/')
  echo "restarting $(basename "$pidfile" .pid) (pid $old, port $port)"
  kill -TERM "$old"
  for _ in $(seq 600); do
    new=$(cat "$pidfile" 2>/dev/null || true)
    [ -n "$new" ] && [ "$new" != "$old" ] && ready "http://127.0.0.1:$port/readyz" && break
    sleep 0.1
  done
done
echo "all web processes restarted"
