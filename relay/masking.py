"""Mask secrets in what leaves for a phone: push notifications, ntfy, Telegram, Slack.

A card on a chat or lock screen is read by whoever holds the phone, kept by the chat
service and, for Web Push and ntfy, passes through a third party. The tokens, keys and
passwords an agent's call carries must not travel with it. The dashboard, behind a
login, still shows the input whole: that is where a person reads what they approve.

`mask_secrets` is the one function every such surface calls. It recognises:

- the shapes of well-known credentials (GitHub, GitLab, Slack, AWS, Google, Stripe,
  OpenAI/Anthropic, npm, PyPI, SendGrid, Telegram bot tokens, JWTs, PEM private keys,
  Gatehouse's own tokens);
- a value after a secret-sounding name: `password=…`, `"api_key": "…"`, `TOKEN: …`,
  `export GITHUB_TOKEN=…`, `--password …`, `-p…` of mysql;
- credentials in HTTP: `Authorization: Bearer …` / `Basic …`, `curl -u user:pass`,
  and the password in `scheme://user:password@host`.

A mask keeps a harmless prefix (`ghp_`, `AKIA`, the key's name) so a person can still
tell what kind of secret is there. Masking cannot know every secret: it narrows what
travels, and the surfaces that mask also withhold one-tap Allow when anything was masked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

MASK = "•••••"

# (name, pattern, how many leading characters of the match stay visible)
_SHAPES: list[tuple[str, str, int]] = [
    (
        "pem",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)",
        0,
    ),
    ("github", r"\b(?:gh[pousr])_[A-Za-z0-9]{30,255}\b", 4),
    ("github-fine", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b", 11),
    ("gitlab", r"\bglpat-[A-Za-z0-9_\-]{20,}", 6),
    ("slack", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", 5),
    ("slack-webhook", r"hooks\.slack\.com/services/[A-Za-z0-9/_\-]+", 26),
    ("aws-key-id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", 4),
    ("google", r"\bAIza[0-9A-Za-z_\-]{35}", 4),
    ("stripe", r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{10,}", 8),
    ("anthropic", r"\bsk-ant-[A-Za-z0-9_\-]{10,}", 7),
    ("openai", r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}", 3),
    ("npm", r"\bnpm_[A-Za-z0-9]{36}\b", 4),
    ("pypi", r"\bpypi-[A-Za-z0-9_\-]{50,}", 5),
    ("sendgrid", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", 3),
    ("telegram-bot", r"(?<![0-9])\d{8,10}:[A-Za-z0-9_\-]{35}\b", 0),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", 0),
    ("gatehouse", r"\bgh[ap]_[A-Za-z0-9_\-]{40,}", 4),
]

# Names whose value is a secret: password, passwd, pwd, secret, token, api_key, apikey,
# access_key, private_key, client_secret, credentials, auth — alone or inside a longer
# name (GITHUB_TOKEN, db_password, X-Api-Key).
# The parts around the keyword are bounded: unbounded, a long run of name characters made
# every start position scan to the end (40 KB of `x` took a minute; quadratic).
_NAME = (
    r"[A-Za-z0-9_.\-]{0,64}?(?:passw(?:or)?d|passphrase|\bpwd|secret|token|api[_\-]?key|access[_\-]?key|"
    r"private[_\-]?key|credentials?|\bauth(?![a-z]))[A-Za-z0-9_.\-]{0,64}"
)
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"
_BARE = r"[^\s\"',;&|)}\]]+"

_ASSIGNMENT = re.compile(
    # NAME=value, NAME: value, "name": "value", name = 'value' (the value may be quoted)
    rf"(?P<key>[\"']?(?P<name>{_NAME})[\"']?\s*(?:=|:)\s*)(?P<value>{_QUOTED}|{_BARE})",
    re.IGNORECASE,
)
_FLAG = re.compile(
    rf"(?P<key>--?(?P<name>{_NAME})(?:\s+|=))(?P<value>{_QUOTED}|{_BARE})",
    re.IGNORECASE,
)
_AUTH_HEADER = re.compile(
    r"(?P<key>\b(?:authorization|proxy-authorization)\s*[:=]\s*[\"']?\s*(?:bearer|basic|token|digest)?\s*)"
    r"(?P<value>[A-Za-z0-9._~+/=\-]{6,})",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<key>\b(?:bearer|basic)\s+)(?P<value>[A-Za-z0-9._~+/\-]{12,}=*)", re.IGNORECASE)
_CURL_USER = re.compile(r"(?P<key>(?:\s|^)(?:-u|--user)\s*[\"']?[^\s:\"']+:)(?P<value>[^\s\"']+)")
_MYSQL_PASSWORD = re.compile(r"(?P<key>\b(?:mysql|mysqldump|mariadb)\b[^\n|;&]*?\s-p)(?P<value>[^\s\"']+)")
_URL_PASSWORD = re.compile(r"(?P<key>\b[a-z][a-z0-9+.\-]*://[^\s/:@\"']+:)(?P<value>[^\s/@\"']+)(?=@)", re.IGNORECASE)

_CONTEXTUAL = [
    ("authorization", _AUTH_HEADER),
    ("authorization", _BEARER),
    ("url-password", _URL_PASSWORD),
    ("named-value", _ASSIGNMENT),
    ("named-flag", _FLAG),
    ("user-password", _CURL_USER),
    ("mysql-password", _MYSQL_PASSWORD),
]
_SHAPE_RES = [(name, re.compile(pattern), keep) for name, pattern, keep in _SHAPES]
# Values that name a secret without being one: leave `password=$DB_PASSWORD`, `token: null`.
_NOT_A_SECRET = re.compile(
    r"^[\"']?(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_]+%|\*+|•+|null|none|true|false|bearer|basic|digest|"
    r"<[^>]*>|\{\{[^}]*\}\}|\.\.\.|…|)[\"']?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Masked:
    """Text with its secrets masked, and which kinds of secret were found."""

    text: str
    kinds: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.kinds)


# What a phone surface can show is a few KB; past this the text is cut (with "…") before
# masking, so one huge input cannot hold a sender thread (the patterns are linear per
# start position at best: 900 KB of `-` took 18 s). The cut is far past any excerpt.
MAX_MASKED_CHARS = 16 * 1024


def mask_secrets(text: str) -> Masked:
    """Mask every secret this module recognises in `text`; `kinds` lists what was found.

    - Text past `MAX_MASKED_CHARS` is cut first, marked with "…": nothing past the cut is shown.
    """
    if len(text) > MAX_MASKED_CHARS:
        text = text[:MAX_MASKED_CHARS] + "…"
    kinds: list[str] = []
    for name, pattern, keep in _SHAPE_RES:
        text, count = pattern.subn(partial(_mask_shape, keep), text)
        if count:
            kinds.append(name)
    for name, pattern in _CONTEXTUAL:
        found: list[bool] = []
        text = pattern.sub(partial(_mask_value, found=found), text)
        if found:
            kinds.append(name)
    return Masked(text, tuple(dict.fromkeys(kinds)))


def mask(text: str) -> str:
    """`mask_secrets(text).text`, for surfaces that only need the words."""
    return mask_secrets(text).text


def _mask_shape(keep: int, match: re.Match[str]) -> str:
    return match.group(0)[:keep] + MASK


def _mask_value(match: re.Match[str], *, found: list[bool]) -> str:
    value = match.group("value")
    if MASK in value or _NOT_A_SECRET.match(value):
        return match.group(0)
    found.append(True)
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
    return f"{match.group('key')}{quote}{MASK}{quote}"
