#!/usr/bin/env bash
# One web process of `make prod`: Daphne on 127.0.0.1:PORT, started again whenever it
# exits on its own. A rolling restart sends SIGTERM to the Daphne process alone (its pid
# is in var/prod/web-N.pid): it drains (gatehouse/serve.py) and this loop starts a fresh
# one. SIGTERM to this script (honcho stopping) stops both for good.
set -uo pipefail
# Job control: Daphne gets its own process group, so a signal honcho sends to this
# script's group reaches Daphne once (forwarded below), not twice (a second signal
# means "stop now, skip the drain").
set -m
cd "$(dirname "$0")/.."
n="$1" port="$2"
pidfile="${GATEHOUSE_RUN_DIR:-var/prod}/web-$n.pid"
stopping=0 child=0
trap 'stopping=1; [ "$child" != 0 ] && kill -TERM "$child" 2>/dev/null' TERM INT
while [ "$stopping" = 0 ]; do
  "${BIN:-.venv/bin}/python" -m gatehouse.serve -b 127.0.0.1 -p "$port" --proxy-headers -v 0 gatehouse.asgi:application &
  child=$!
  echo "$child" >"$pidfile"
  # `wait` returns early when a trapped signal arrives; wait again for the drain to end.
  wait "$child"
  while kill -0 "$child" 2>/dev/null; do wait "$child"; done
  [ "$stopping" = 0 ] && echo "web$n: Daphne (pid $child) exited; starting it again"
done
rm -f "$pidfile"
