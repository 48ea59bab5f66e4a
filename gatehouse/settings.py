"""Gatehouse settings, read from the environment only (12-factor).

Defaults make `make run` work on a laptop: SQLite in `var/`, an in-process claim store
and channel layer. `DATABASE_URL` and `REDIS_URL` switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from redis.exceptions import ConnectionError as RedisConnectionError

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("GATEHOUSE_VAR_DIR", BASE_DIR / "var"))

# Refused in production (below); only `make run` on a laptop ever uses it.
DEV_SECRET_KEY = "django-insecure-gatehouse-development-key-do-not-use-in-production"  # noqa: S105


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), not {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_secret(name: str, default: str = "") -> str:
    """Read a secret from NAME, or from the file named by NAME_FILE (Docker/K8s secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from None
    return os.environ.get(name, default)


GATEHOUSE_ENV = env_str("GATEHOUSE_ENV", "development")
KNOWN_ENVIRONMENTS = ("development", "production")
if GATEHOUSE_ENV not in KNOWN_ENVIRONMENTS:
    # A typo ("prod", "Production") must not quietly run with development's debug and keys.
    raise ImproperlyConfigured(f"GATEHOUSE_ENV must be one of {', '.join(KNOWN_ENVIRONMENTS)}, not {GATEHOUSE_ENV!r}")
PRODUCTION = GATEHOUSE_ENV == "production"

DEBUG = env_bool("DEBUG", default=not PRODUCTION)
SECRET_KEY = env_secret("SECRET_KEY") or ("" if PRODUCTION else DEV_SECRET_KEY)

if PRODUCTION:
    # Fail at start-up, not at the first forged cookie.
    if DEBUG:
        raise ImproperlyConfigured("GATEHOUSE_ENV=production refuses to start with DEBUG on.")
    if not SECRET_KEY or SECRET_KEY == DEV_SECRET_KEY or len(SECRET_KEY) < 50:
        raise ImproperlyConfigured(
            "GATEHOUSE_ENV=production needs SECRET_KEY (or SECRET_KEY_FILE): at least 50 "
            "random characters, not the development default."
        )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "" if PRODUCTION else "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
PUBLIC_URL = env_str("GATEHOUSE_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Whether GATEHOUSE_PUBLIC_URL was set; if not, pages name the address they were reached at.
PUBLIC_URL_SET = bool(os.environ.get("GATEHOUSE_PUBLIC_URL"))
# Full origins (scheme://host:port) whose pages may open a dashboard socket; empty means the
# server's own origin, GATEHOUSE_PUBLIC_URL's and CSRF_TRUSTED_ORIGINS (relay/origins.py).
GATEHOUSE_ALLOWED_ORIGINS = env_list("GATEHOUSE_ALLOWED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "approvals",
    "relay",
]

MIDDLEWARE = [
    # Returns database connections (and pooled ones to the pool) as each request ends.
    "approvals.middleware.ReleaseConnectionsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Daphne serves no static files itself; WhiteNoise does, in development and production.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Times on pages in the viewer's zone (a cookie static/time.js sets).
    "approvals.middleware.ViewerTimeZoneMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "approvals.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "gatehouse.urls"
ASGI_APPLICATION = "gatehouse.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
    {
        # The request card only (gatehouse.jinja): rendered for every push to every dashboard.
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "NAME": "jinja2",
        "DIRS": [BASE_DIR / "templates" / "jinja2"],
        "APP_DIRS": False,
        "OPTIONS": {"environment": "gatehouse.jinja.environment"},
    },
]

# --- Database -------------------------------------------------------------------------

DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'gatehouse.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 0))}
# Seconds a write waits for a lock before it fails: a locked audit table must turn into a
# prompt "audit unavailable" deny, never a request that hangs past its deadline.
DB_LOCK_TIMEOUT = env_int("DB_LOCK_TIMEOUT", 20)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = f"-c lock_timeout={DB_LOCK_TIMEOUT * 1000}"
    # The statements of fixed text on every call's path are kept prepared on each
    # connection once it has sent them this many times (gatehouse.postgresql.batch);
    # DB_PREPARED=0 for a pooler in front of PostgreSQL that cannot keep them (PgBouncer in
    # transaction mode before 1.21, or without max_prepared_statements).
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 5 if env_bool("DB_PREPARED", True) else None
    DATABASES["default"]["ENGINE"] = "gatehouse.postgresql"  # Django's, with those cursors
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # IMMEDIATE takes SQLite's write lock at BEGIN, so two decisions can never read the
    # same audit-chain head; WAL lets the dashboard read while an agent writes.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": DB_LOCK_TIMEOUT,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    # The denials monitor's covering indexes (`include=`) are PostgreSQL's; SQLite builds
    # them without the extra columns, which is all it can do: nothing for a user to act on.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
elif DATABASES["default"]["ENGINE"] == "gatehouse.postgresql" and env_bool("DB_POOL", True):
    # Under ASGI every request and every Channels database call runs on a worker thread,
    # and with CONN_MAX_AGE=0 each one opened a new PostgreSQL connection (a backend fork
    # per request: a quarter of the server's busy time on a push, docs/PERFORMANCE.md).
    # The pool keeps them. Requests give theirs back through ReleaseConnectionsMiddleware
    # (Django's own request_finished cannot see it under ASGI) and Channels calls through
    # database_sync_to_async. Each checkout is checked first, so connections a database
    # restart or a network cut killed are replaced instead of failing the next calls:
    # gatehouse.postgresql checks without a query (psycopg-pool's own check sends one).
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django refuses persistent connections with a pool
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = False  # psycopg-pool's check by query
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env_int("DB_POOL_MIN", 2),
        "max_size": env_int("DB_POOL_MAX", 20),
        "timeout": env_int("DB_POOL_TIMEOUT", 5),
        # psycopg-pool retries a failed connect with a doubling delay until this many
        # seconds have passed, then starts afresh on the next demand: short, so that after
        # an outage the pool reconnects within seconds rather than minutes.
        "reconnect_timeout": env_int("DB_POOL_RECONNECT_TIMEOUT", 10),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: one URL feeds the channel layer and the claim store -----------------------

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 defaults to a 5 s socket timeout, the same as channels-redis's
                # 5 s BZPOPMIN: an idle consumer's read would time out and kill its socket.
                # A command on a pooled connection that a Redis restart broke reconnects
                # and runs once more, instead of failing the socket that drew it.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15, "retry_on_error": [RedisConnectionError]}],
                "prefix": env_str("GATEHOUSE_REDIS_PREFIX", "gatehouse"),
                "capacity": 1000,
                "expiry": 60,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
GATEHOUSE_REDIS_PREFIX = env_str("GATEHOUSE_REDIS_PREFIX", "gatehouse")
# Login failure counters (approvals/ratelimit.py) are shared by every process through Redis.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "ratelimit": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": f"{GATEHOUSE_REDIS_PREFIX}:rl",
            "OPTIONS": {"socket_timeout": 2},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ratelimit"}
    ),
}

# --- Gatehouse behaviour --------------------------------------------------------------

GATEHOUSE_ASK_TIMEOUT = env_int("GATEHOUSE_ASK_TIMEOUT", 300)
# The deadline of a deferred headless ask when its team sets none (TeamSettings.deferred_timeout).
GATEHOUSE_DEFERRED_TIMEOUT = env_int("GATEHOUSE_DEFERRED_TIMEOUT", 24 * 3600)

# Signed checkpoints of the audit chain's head, outside the database (approvals.checkpoints).
# The private key is for the sweeper and `audit_checkpoint` only: leave it unset (and
# unreadable) for the web process. `audit_verify` needs only the public key.
GATEHOUSE_CHECKPOINT_FILE = Path(env_str("GATEHOUSE_CHECKPOINT_FILE") or VAR_DIR / "audit-checkpoints.jsonl")
GATEHOUSE_CHECKPOINT_KEY_FILE = env_str("GATEHOUSE_CHECKPOINT_KEY_FILE")
GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE = env_str("GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE")
# Rows written after the newest checkpoint can be cut undetected: keep that window short.
GATEHOUSE_CHECKPOINT_ROWS = env_int("GATEHOUSE_CHECKPOINT_ROWS", 100)
GATEHOUSE_CHECKPOINT_MINUTES = env_int("GATEHOUSE_CHECKPOINT_MINUTES", 1)
GATEHOUSE_MAX_WAIT = env_int("GATEHOUSE_MAX_WAIT", 600)
GATEHOUSE_CLAIM_TTL_MS = env_int("GATEHOUSE_CLAIM_TTL_MS", 10_000)
GATEHOUSE_SWEEP_INTERVAL = env_int("GATEHOUSE_SWEEP_INTERVAL", 5)
# Deadlines are swept by `manage.py run_sweeper`, a process of its own. Only a single
# server process with nothing beside it (`make run`) sweeps inside itself instead.
GATEHOUSE_INPROCESS_SWEEPER = env_bool("GATEHOUSE_INPROCESS_SWEEPER")
GATEHOUSE_DENIAL_LIMIT = env_int("GATEHOUSE_DENIAL_LIMIT", 3)
# Asks one agent may have waiting for a person; beyond it a new ask is denied (audited).
GATEHOUSE_MAX_PENDING_PER_AGENT = env_int("GATEHOUSE_MAX_PENDING_PER_AGENT", 200)
# Sockets one agent token may hold open at once; one more is closed with 4429.
GATEHOUSE_MAX_AGENT_SOCKETS = env_int("GATEHOUSE_MAX_AGENT_SOCKETS", 8)

# --- Classifiers (relay/classifiers.py; docs/RELAY.md) --------------------------------------

GATEHOUSE_LLM_CLASSIFIER = env_bool("GATEHOUSE_LLM_CLASSIFIER")
GATEHOUSE_CLASSIFIER_MODEL = env_str("GATEHOUSE_CLASSIFIER_MODEL", "claude-haiku-4-5")
ANTHROPIC_API_KEY = env_secret("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")

# --- Chat bridges: each is enabled by its token (docs/BRIDGES.md) ------------------------

TELEGRAM_BOT_TOKEN = env_secret("TELEGRAM_BOT_TOKEN")
TELEGRAM_CHAT_ID = env_str("TELEGRAM_CHAT_ID")
TELEGRAM_APPROVERS = env_list("TELEGRAM_APPROVERS")
TELEGRAM_API_URL = env_str("TELEGRAM_API_URL", "https://api.telegram.org")
TELEGRAM_WEBHOOK_SECRET = env_secret("TELEGRAM_WEBHOOK_SECRET")
TELEGRAM_CHAT_INTERVAL_MS = env_int("TELEGRAM_CHAT_INTERVAL_MS", 1000)
TELEGRAM_GLOBAL_RATE = env_int("TELEGRAM_GLOBAL_RATE", 30)
SLACK_BOT_TOKEN = env_secret("SLACK_BOT_TOKEN")
SLACK_SIGNING_SECRET = env_secret("SLACK_SIGNING_SECRET")
SLACK_CHANNEL = env_str("SLACK_CHANNEL")
SLACK_APPROVERS = env_list("SLACK_APPROVERS")
SLACK_API_URL = env_str("SLACK_API_URL", "https://slack.com/api")
SLACK_CHANNEL_INTERVAL_MS = env_int("SLACK_CHANNEL_INTERVAL_MS", 1000)
# How long POST /hooks/claude-code waits for a person when the caller sets no ?wait=
# (plain curl as the hook); 0 means until the request's own ask deadline.
GATEHOUSE_HOOK_WAIT = env_int("GATEHOUSE_HOOK_WAIT", 0)

# --- Push to phones: Web Push and ntfy (docs/DASHBOARD.md, docs/BRIDGES.md) ------------------

# Host names a Web Push subscription's endpoint may name (the SSRF guard, relay/push/endpoints.py);
# "*.example.com" covers its subdomains; plain http only for a loopback host listed here.
GATEHOUSE_PUSH_SERVICES = env_list(
    "GATEHOUSE_PUSH_SERVICES",
    "fcm.googleapis.com,updates.push.services.mozilla.com,web.push.apple.com,*.notify.windows.com",
)
GATEHOUSE_VAPID_PRIVATE_KEY = env_secret("GATEHOUSE_VAPID_PRIVATE_KEY")
GATEHOUSE_VAPID_SUBJECT = env_str("GATEHOUSE_VAPID_SUBJECT")
# A self-hosted ntfy server (https://ntfy.example.com); empty turns the ntfy channel off.
GATEHOUSE_NTFY_URL = env_str("GATEHOUSE_NTFY_URL").rstrip("/")
GATEHOUSE_NTFY_TOKEN = env_secret("GATEHOUSE_NTFY_TOKEN")

# --- Auth -----------------------------------------------------------------------------

LOGIN_URL = "/accounts/login/"
# Failed logins allowed per (address, username) and per address within the window (seconds).
GATEHOUSE_LOGIN_MAX_FAILURES = env_int("GATEHOUSE_LOGIN_MAX_FAILURES", 5)
GATEHOUSE_LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("GATEHOUSE_LOGIN_MAX_FAILURES_PER_ADDRESS", 50)
GATEHOUSE_LOGIN_WINDOW = env_int("GATEHOUSE_LOGIN_WINDOW", 900)
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    # No rule: closes the person's dashboard sockets whenever any path saves a new password.
    {"NAME": "approvals.auth.PasswordChangeEndsSessions"},
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "approvals.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "approvals.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Gatehouse API",
    "DESCRIPTION": "Permission gateway and remote-approval relay for AI coding agents.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from our own static files: no CDN, and the CSP stays strict.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # Two choice sets share the field name "behavior": a decision's and a rule's.
    "ENUM_NAME_OVERRIDES": {
        "DecisionBehaviorEnum": ["allow", "deny"],
        "RuleBehaviorEnum": "approvals.models.RuleBehavior",
        "PermissionModeEnum": "approvals.models.Mode",
        "RuleSourceEnum": "approvals.models.RuleSource",
        "PersonRuleSourceEnum": "approvals.models.PERSON_SOURCES",
        # A pause's answer and a team's unknown_tools: both ask a person or deny.
        "AskOrDenyEnum": ["ask", "deny"],
    },
}

# Bodies over 1 MiB are refused with 413 before any JSON parsing.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
GATEHOUSE_MAX_BODY_BYTES = DATA_UPLOAD_MAX_MEMORY_SIZE

# --- HTTP security --------------------------------------------------------------------

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Static, i18n ---------------------------------------------------------------------

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# Serve straight from static/ and the apps, so `make run` needs no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- Logging: one structured line per event ---------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
    },
}
