"""Template filters that put numbers in the units people think in."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template

register = template.Library()


def duration_text(seconds: float | str | None) -> str:
    """A duration a person reads at a glance: "850 ms", "4.2 s", "3 min 5 s", "2 h 5 min"."""
    if seconds is None or seconds == "":
        return "—"
    seconds = max(float(seconds), 0.0)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days {hours % 24} h" if hours % 24 else f"{hours // 24} days"


@register.filter
def ms(value: float | str | None) -> str:
    """Milliseconds as a human duration ("—" for no value)."""
    return duration_text(None if value in (None, "") else float(value) / 1000)


@register.filter
def seconds(value: float | str | None) -> str:
    return duration_text(value)


@register.filter
def since(later: datetime | None, earlier: datetime | None) -> str:
    """The time between two moments: `{{ decided_at|since:created_at }}`."""
    if later is None or earlier is None:
        return "—"
    return duration_text((later - earlier).total_seconds())


def _now() -> datetime:
    from django.utils import timezone

    return timezone.now()


@register.filter
def ago(moment: datetime | None) -> str:
    """How long ago, in the largest unit that fits: "just now", "45 s ago", "3 min ago"."""
    if moment is None:
        return "never"
    elapsed = (_now() - moment).total_seconds()
    if elapsed < 5:
        return "just now"
    return f"{_largest_unit(elapsed)} ago"


def _largest_unit(seconds: float) -> str:
    """Only the largest unit of a duration: "3 min", "2 h", "5 days"."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds // 3600:.0f} h"
    return f"{seconds // 86400:.0f} days"


@register.filter
def left(moment: datetime | None) -> str:
    """Time left until `moment`: "4 min left", "expiring…"."""
    if moment is None:
        return ""
    remaining = (moment - _now()).total_seconds()
    if remaining <= 0:
        return "expiring…"
    return f"{duration_text(remaining)} left"


# How a moment is written: the server's text (in the viewer's zone once the cookie is
# set) is what a page without JavaScript shows; `static/time.js` rewrites it with the
# browser's own zone and locale, using `data-style`.
LOCAL_FORMATS = {"datetime": "j M Y, H:i T", "seconds": "j M Y, H:i:s T", "date": "j M Y", "time": "H:i:s T"}


@register.filter
def local(moment: datetime | None, style: str = "datetime") -> str:
    """A moment as `<time>` in the viewer's zone, to the minute (or second); never microseconds."""
    from django.utils import dateformat, timezone
    from django.utils.html import format_html

    if moment is None:
        return "—"
    style = style if style in LOCAL_FORMATS else "datetime"
    text = dateformat.format(timezone.localtime(moment), LOCAL_FORMATS[style])
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return format_html('<time class="local" datetime="{}" data-style="{}">{}</time>', stamp, style, text)
