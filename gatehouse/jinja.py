"""The Jinja2 environment of the templates rendered on the hot path: the request card.

A card is rendered for every push to every dashboard; Jinja2 compiles a template to
Python, where Django's engine walks a node tree and resolves each variable by trial.
Everything else stays with Django's engine.

- Escaping is Django's own (`conditional_escape` as `finalize`, Jinja2's autoescape
  off): the card's bytes are the same whichever page or push carries it, and what is
  marked safe (a `SafeString` from `approvals.cards`) passes as it does in Django.
- The filters are the Django ones the card used, with Django's semantics: a date is
  shown in the active time zone, as Django's `date` filter shows it.
- A missing attribute renders empty, as in Django's engine (`ChainableUndefined`).
"""

from __future__ import annotations

import html
from datetime import datetime
from typing import Any

from django.template import defaultfilters
from django.urls import reverse
from django.utils import dateformat
from django.utils.functional import Promise
from django.utils.safestring import SafeString
from django.utils.timezone import template_localtime  # type: ignore[attr-defined]  # not in the stubs
from jinja2 import ChainableUndefined, Environment

from approvals.templatetags.human import ago, left
from approvals.templatetags.visible import reveal, spelled


def environment(**options: Any) -> Environment:
    options.update(autoescape=False, finalize=escape, undefined=ChainableUndefined)
    env = Environment(keep_trailing_newline=True, **options)  # noqa: S701 - `finalize` escapes every output
    env.filters.update(
        reveal=reveal,
        spelled=spelled,
        ago=ago,
        left=left,
        date=date,
        truncatechars=defaultfilters.truncatechars,
        pluralize=defaultfilters.pluralize,
        capfirst=defaultfilters.capfirst,
        linebreaksbr=linebreaksbr,
    )
    env.globals["url"] = url
    return env


def escape(value: Any) -> str:
    """What `{{ value }}` writes: Django's `conditional_escape`, without its per-call lazy check."""
    if isinstance(value, Promise):
        value = str(value)
    if hasattr(value, "__html__"):
        return str(value.__html__())
    return html.escape(str(value))


def date(value: datetime | None, fmt: str) -> str:
    """Django's `date` filter as its engine applies it: the moment in the active time zone.

    - `fmt` is a format string (never a setting's name such as "DATE_FORMAT"); "c" is
      Django's ISO 8601, the moment's own `isoformat()`.
    """
    if not value:
        return ""
    moment = template_localtime(value)
    return moment.isoformat() if fmt == "c" else dateformat.format(moment, fmt)


def linebreaksbr(value: Any) -> SafeString:
    return defaultfilters.linebreaksbr(value, autoescape=True)


def url(name: str, *args: Any) -> str:
    return reverse(name, args=args)
