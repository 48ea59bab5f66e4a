#!/usr/bin/env bash
# `make test`: lint, type-check, then the whole suite on SQLite and on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

$BIN/ruff check .
$BIN/mypy .

PG_URL="${GATEHOUSE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
run_suite() {
  echo "== tests on SQLite"
  env -u DATABASE_URL $BIN/python -m pytest "$@"
  if $BIN/python -c "import psycopg,sys; psycopg.connect(sys.argv[1], connect_timeout=2).close()" "$PG_URL" 2>/dev/null; then
    echo "== tests on PostgreSQL ($PG_URL)"
    # The browser and Claude Code CLI tests exercise pages and hooks, not the database
    # engine; they run once, on SQLite.
    DATABASE_URL="$PG_URL" $BIN/python -m pytest -m "not browser and not claude_cli" "$@"
  else
    echo "== PostgreSQL not reachable at $PG_URL: tests ran on SQLite only"
  fi
}
export -f run_suite
export BIN PG_URL
scripts/test-services.sh bash -c 'run_suite "$@"' run_suite "$@"
