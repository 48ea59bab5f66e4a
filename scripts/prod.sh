#!/usr/bin/env bash
# `make prod`: the production layout on one machine, from the checkout. Caddy terminates
# TLS on PORT and balances over WORKERS Daphne processes; the deadline sweeper and (when
# configured) the Telegram bot run beside them, all under honcho: stopping it (Ctrl-C,
# SIGTERM) stops everything it started. See docs/DEPLOY.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-.venv/bin}"
PY="$BIN/python"

missing=()
[ -n "${DATABASE_URL:-}" ] || missing+=(DATABASE_URL)
[ -n "${REDIS_URL:-}" ] || missing+=(REDIS_URL)
if [ "${#missing[@]}" != 0 ]; then
  echo "make prod needs ${missing[*]} (PostgreSQL and Redis), for example:" >&2
  echo "  DATABASE_URL=postgres://gatehouse@127.0.0.1:5432/gatehouse REDIS_URL=redis://127.0.0.1:6379/0 make prod" >&2
  exit 2
fi

apt_updated=0
need_apt() {  # need_apt BINARY PACKAGE...
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$apt_updated" = 0 ]; then apt-get update -qq >/dev/null; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${@:2}" >/dev/null
}
need_apt caddy caddy || { echo "make prod needs Caddy: apt-get install caddy (as root)" >&2; exit 2; }

PORT="${PORT:-8443}"
WORKERS="${WORKERS:-2}"
WEB_PORT="${WEB_PORT:-8001}"
SITE_HOST="${DOMAIN:-localhost}"
URL="https://$SITE_HOST:$PORT"
[ "$PORT" = 443 ] && URL="https://$SITE_HOST"
RUN_DIR="${GATEHOUSE_RUN_DIR:-$PWD/var/prod}"
mkdir -p "$RUN_DIR"

# A real certificate for DOMAIN: TLS_CERT and TLS_KEY files, or Caddy's ACME (which needs
# port 443 reachable from the internet). A local name: Caddy's internal CA.
if [ -n "${TLS_CERT:-}" ]; then TLS="$TLS_CERT ${TLS_KEY:?TLS_CERT needs TLS_KEY}"
elif [ -n "${DOMAIN:-}" ]; then TLS="${ACME_EMAIL:?DOMAIN without TLS_CERT/TLS_KEY needs ACME_EMAIL for a certificate}"
else TLS=internal; fi

# Production settings, each overridable from the environment.
if [ -z "${SECRET_KEY:-}" ] && [ -z "${SECRET_KEY_FILE:-}" ]; then
  if [ ! -s "$RUN_DIR/secret_key" ]; then
    (umask 077 && "$PY" -c "import secrets; print(secrets.token_urlsafe(64))" >"$RUN_DIR/secret_key")
  fi
  export SECRET_KEY_FILE="$RUN_DIR/secret_key"
fi
export GATEHOUSE_ENV=production DEBUG=0
export ALLOWED_HOSTS="${ALLOWED_HOSTS:-$SITE_HOST}"
export CSRF_TRUSTED_ORIGINS="${CSRF_TRUSTED_ORIGINS:-$URL}"
export GATEHOUSE_PUBLIC_URL="${GATEHOUSE_PUBLIC_URL:-$URL}"
export BIN GATEHOUSE_RUN_DIR="$RUN_DIR"

# The deploy checks and the static files need neither each other nor the schema: side by
# side they cost one Django start-up instead of two.
"$PY" manage.py check --deploy --fail-level WARNING & checked=$!
"$PY" manage.py collectstatic --noinput -v 0 & collected=$!
wait "$checked"
wait "$collected"
"$PY" manage.py migrate --noinput -v 0
"$PY" manage.py ensure_admin

# Caddy keeps its certificates and local CA under var/prod, never in $HOME or /etc.
export XDG_DATA_HOME="$RUN_DIR/caddy-data" XDG_CONFIG_HOME="$RUN_DIR/caddy-config"
export GATEHOUSE_SITE="$URL" GATEHOUSE_TLS="$TLS" GATEHOUSE_BIND="${BIND:-0.0.0.0}"
upstreams=()
{
  echo "proxy: exec caddy run --config deploy/Caddyfile --adapter caddyfile"
  for n in $(seq 1 "$WORKERS"); do
    port=$((WEB_PORT + n - 1))
    upstreams+=("127.0.0.1:$port")
    echo "web$n: exec scripts/prod-web.sh $n $port"
  done
  echo "sweeper: exec $PY manage.py run_sweeper"
  if [ -n "${TELEGRAM_BOT_TOKEN:-}${TELEGRAM_BOT_TOKEN_FILE:-}" ]; then
    echo "telegram: exec $PY manage.py run_telegram_bot"
  fi
} >"$RUN_DIR/Procfile"
export GATEHOUSE_UPSTREAMS="${upstreams[*]}"

echo "Gatehouse: $URL ($WORKERS web processes on 127.0.0.1:$WEB_PORT-$((WEB_PORT + WORKERS - 1)))"
if [ "$TLS" = internal ]; then
  echo "Gatehouse: Caddy's local CA certificate: $XDG_DATA_HOME/caddy/pki/authorities/local/root.crt"
  echo "           (written when Caddy starts; trust it in clients, e.g. SSL_CERT_FILE or NODE_EXTRA_CA_CERTS)"
fi
echo "Gatehouse: rolling restart: scripts/prod-restart.sh; stop: Ctrl-C"
exec "$BIN/honcho" --no-colour -f "$RUN_DIR/Procfile" -d "$PWD" start
