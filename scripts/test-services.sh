#!/usr/bin/env bash
# Run a command with the services the tests need: Redis (a private one on a free port
# when none answers on REDIS_URL) and the system packages the end-to-end tests drive.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

apt_updated=0
need_apt() {  # need_apt BINARY PACKAGE...
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$apt_updated" = 0 ]; then apt-get update -qq >/dev/null; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${@:2}" >/dev/null
}

need_apt redis-server redis-server
need_apt chromium chromium
need_apt node nodejs npm
# The SDK's Bash tool sandboxes commands with bubblewrap when it is installed.
need_apt bwrap bubblewrap
# `make prod` and its end-to-end test put Caddy in front (tests/e2e/prod).
need_apt caddy caddy

# The real Claude Code CLI, in a folder git ignores.
CLAUDE_VERSION=2.1.332
if [ ! -x .tools/node_modules/.bin/claude ] || ! grep -q "\"version\": \"$CLAUDE_VERSION\"" .tools/node_modules/@anthropic-ai/claude-code/package.json 2>/dev/null; then
  mkdir -p .tools
  (cd .tools && npm install --silent --no-audit --no-fund "@anthropic-ai/claude-code@$CLAUDE_VERSION" >/dev/null 2>&1) || echo "warning: npm install of Claude Code failed" >&2
fi
export GATEHOUSE_CLAUDE_BIN="$PWD/.tools/node_modules/.bin/claude"

# axe-core, which the browser tests run on every page (accessibility), in the same folder.
AXE_MAJOR=4
if ! grep -q "\"version\": \"$AXE_MAJOR\." .tools/node_modules/axe-core/package.json 2>/dev/null; then
  mkdir -p .tools
  (cd .tools && npm install --silent --no-audit --no-fund "axe-core@$AXE_MAJOR" >/dev/null 2>&1) || echo "warning: npm install of axe-core failed" >&2
fi

redis_answers() { "$PY" -c "import redis,sys; redis.Redis.from_url(sys.argv[1], socket_timeout=1).ping()" "$1" 2>/dev/null; }

REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/9}"
if ! redis_answers "$REDIS_URL"; then
  port=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
  mkdir -p var/redis
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$PWD/var/redis" \
    --daemonize yes --pidfile "$PWD/var/redis/redis.pid" --logfile "$PWD/var/redis/redis.log"
  trap 'kill "$(cat "$PWD/var/redis/redis.pid" 2>/dev/null)" 2>/dev/null || true' EXIT
  REDIS_URL="redis://127.0.0.1:$port/9"
  for _ in $(seq 50); do redis_answers "$REDIS_URL" && break; "$PY" -c "import time; time.sleep(0.1)"; done
  echo "started a private Redis at $REDIS_URL"
fi
export REDIS_URL
"$@"
