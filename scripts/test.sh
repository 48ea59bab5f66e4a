#!/usr/bin/env bash
# `make test`: lint, type-check, then the whole suite on SQLite and on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

$BIN/ruff check .
$BIN/ruff format --check .
$BIN/mypy .

PG_URL="${GATEHOUSE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
run_suite() {
  echo "== tests on SQLite"
  env -u DATABASE_URL $BIN/python -m pytest --durations=20 -m "not postgresql" "$@"
  if $BIN/python -c "import psycopg,sys; psycopg.connect(sys.argv[1], connect_timeout=2).close()" "$PG_URL" 2>/dev/null; then
    echo "== tests on PostgreSQL ($PG_URL)"
    # The second pass runs the suites whose outcome depends on the database engine
    # (services, API, pages, relay, reliability, security). The engine's own tests touch
    # no database, and the agent-side, browser and Claude Code CLI tests drive the same
    # server code the first pass already proved; running them twice would not fit CI's
    # 90 minutes on two cores.
    DATABASE_URL="$PG_URL" $BIN/python -m pytest -m "not browser and not claude_cli" \
      tests/approvals tests/relay tests/security tests/reliability "$@"
  else
    echo "== PostgreSQL not reachable at $PG_URL: tests ran on SQLite only"
  fi
}
export -f run_suite
export BIN PG_URL
scripts/test-services.sh bash -c 'run_suite "$@"' run_suite "$@"
