#!/usr/bin/env bash
# `make test`: lint, type-check, then the suite on SQLite and its database-dependent part
# again on PostgreSQL. `make test-all` (GATEHOUSE_TEST_ALL=1) adds the smoke runs of the
# benchmark and soak scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

$BIN/ruff check .
$BIN/ruff format --check .
$BIN/mypy .

PG_URL="${GATEHOUSE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
# Two workers per core: most tests wait on real servers (a Daphne start, a deadline, a
# CLI), so one per core leaves the cores half idle (measured on 2 cores: 8:43 with 2
# workers, 6:39 with 4). `loadfile` keeps a module's tests on one worker, so a
# module-scoped server starts once, not once per worker.
PARALLEL="-n ${GATEHOUSE_TEST_WORKERS:-$(( $(nproc) * 2 ))} --dist loadfile"
SQLITE_MARKS="not postgresql"
PG_MARKS="(db_engine or postgresql) and not script_smoke"
if [ "${GATEHOUSE_TEST_ALL:-0}" != 1 ]; then SQLITE_MARKS="$SQLITE_MARKS and not script_smoke"; fi

run_suite() {
  echo "== tests on SQLite"
  # shellcheck disable=SC2086
  env -u DATABASE_URL $BIN/python -m pytest $PARALLEL --durations=20 -m "$SQLITE_MARKS" "$@"
  if $BIN/python -c "import psycopg,sys; psycopg.connect(sys.argv[1], connect_timeout=2).close()" "$PG_URL" 2>/dev/null; then
    echo "== tests on PostgreSQL ($PG_URL)"
    # The db_engine suites (tests/conftest.py lists them and says why) depend on the
    # database engine; everything else drives the same server code through the same ORM
    # and already ran above.
    # shellcheck disable=SC2086
    DATABASE_URL="$PG_URL" $BIN/python -m pytest $PARALLEL --durations=10 -m "$PG_MARKS" "$@"
  else
    echo "== PostgreSQL not reachable at $PG_URL: tests ran on SQLite only"
  fi
}
export -f run_suite
export BIN PG_URL PARALLEL SQLITE_MARKS PG_MARKS
scripts/test-services.sh bash -c 'run_suite "$@"' run_suite "$@"
