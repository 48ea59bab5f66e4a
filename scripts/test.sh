#!/usr/bin/env bash
# `make test`: lint, type-check, then the suite on SQLite and its database-dependent part
# again on PostgreSQL. `make test-all` (GATEHOUSE_TEST_ALL=1) adds the smoke runs of the
# benchmark and soak scripts.
#
# The type check and the two database passes run side by side: they share nothing (each
# test process has its own test database and Redis key prefix, tests/pytest_env.py), and
# most tests wait on real servers, so one pass after the other left the cores half idle
# (measured on 2 cores: 9:39 one after the other). Each pass writes its own log,
# printed whole when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

$BIN/ruff check .
$BIN/ruff format --check .

PG_URL="${GATEHOUSE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
# Workers per pass: most tests wait on real servers (a Daphne start, a deadline, a CLI),
# so more workers than cores keeps the cores busy. `loadfile` keeps a module's tests on
# one worker, so a module-scoped server starts once, not once per worker.
SQLITE_WORKERS="${GATEHOUSE_TEST_WORKERS:-$(( $(nproc) * 2 ))}"
PG_WORKERS="${GATEHOUSE_TEST_PG_WORKERS:-$(nproc)}"
SQLITE_MARKS="not postgresql"
PG_MARKS="(db_engine or postgresql) and not script_smoke"
if [ "${GATEHOUSE_TEST_ALL:-0}" != 1 ]; then SQLITE_MARKS="$SQLITE_MARKS and not script_smoke"; fi
LOGS="var/test-passes"
mkdir -p "$LOGS"

run_suites() {
  local pids=() names=() name status=0 i
  $BIN/mypy . >"$LOGS/mypy.log" 2>&1 &
  pids+=($!) names+=(mypy)
  env -u DATABASE_URL $BIN/python -m pytest -n "$SQLITE_WORKERS" --dist loadfile --durations=20 \
    -m "$SQLITE_MARKS" "$@" >"$LOGS/sqlite.log" 2>&1 &
  pids+=($!) names+=(sqlite)
  if $BIN/python -c "import psycopg,sys; psycopg.connect(sys.argv[1], connect_timeout=2).close()" "$PG_URL" 2>/dev/null; then
    # The db_engine suites (tests/conftest.py lists them and says why) depend on the
    # database engine; everything else drives the same server code through the same ORM
    # and runs once, on SQLite.
    DATABASE_URL="$PG_URL" $BIN/python -m pytest -n "$PG_WORKERS" --dist loadfile --durations=10 \
      -m "$PG_MARKS" "$@" >"$LOGS/postgresql.log" 2>&1 &
    pids+=($!) names+=(postgresql)
  else
    echo "== PostgreSQL not reachable at $PG_URL: tests run on SQLite only"
  fi
  for i in "${!pids[@]}"; do
    name=${names[$i]}
    if wait "${pids[$i]}"; then echo "== $name: passed"; else echo "== $name: FAILED"; status=1; fi
    cat "$LOGS/$name.log"
  done
  return $status
}
export -f run_suites
export BIN PG_URL SQLITE_WORKERS PG_WORKERS SQLITE_MARKS PG_MARKS LOGS
scripts/test-services.sh bash -c 'run_suites "$@"' run_suites "$@"
