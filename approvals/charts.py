"""Charts for the denials monitor, drawn as SVG on the server.

No chart library and no script: the page stays readable with JavaScript off and the CSP
stays strict. Labels (tool names, agent names, rules) come from agents, so every one goes
through `format_html`; colours are classes styled in app.css, never inline styles (the
CSP forbids them).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

WIDTH = 400
# Wider than tall charts: drawn at phone scale, capped in CSS on a desktop.
TIME_WIDTH = 560
LABEL_CHARS = 48


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def bar_chart(items: list[tuple[str, int]], *, title: str, link: Callable[[str], str] | None = None) -> SafeString:
    """Horizontal bars, label above each bar, so long names fit a phone screen.

    - `link(label)`: each bar opens the audit query behind it.
    """
    if not items:
        return format_html('<p class="muted chart-empty">No denials for {} in this period.</p>', title.lower())
    row = 38
    height = row * len(items) + 4
    top = max(value for _, value in items) or 1
    bars = []
    for index, (label, value) in enumerate(items):
        y = index * row
        width = max(2.0, (WIDTH - 60) * value / top)
        bars.append(
            (
                y + 13,
                label or "(none)",
                y + 18,
                f"{width:.1f}",
                f"{width + 6:.1f}",
                y + 30,
                value,
                label or "(none)",
                value,
            )
        )
    body = format_html_join(
        "",
        "<g><title>{}: {}</title>"
        '<text class="chart-label" x="0" y="{}">{}</text>'
        '<rect class="chart-bar" x="0" y="{}" width="{}" height="14" rx="2"></rect>'
        '<text class="chart-value" x="{}" y="{}">{}</text></g>',
        ((b[7], b[8], b[0], b[1], b[2], b[3], b[4], b[5], b[6]) for b in bars),
    )
    if link is not None:
        body = _linked(body, items, link)
    return _svg("chart", WIDTH, height, title, body, linked=link is not None)


def _linked(body: SafeString, items: list[tuple[str, int]], link: Callable[[str], str]) -> SafeString:
    """Each bar group wrapped in a link named for a screen reader ("rm: 3 denials, in the audit log")."""
    groups = body.split("<g>")[1:]
    wrapped = [
        format_html(
            # An SVG link is named by its <title>, which replaces the bar's own tooltip.
            '<a href="{}"><title>{}: {} denials, in the audit log</title><g>{}</a>',
            link(label),
            label or "(none)",
            value,
            mark_safe(group.split("</title>", 1)[-1]),  # noqa: S308 - a piece of `body`, built by format_html
        )
        for (label, value), group in zip(items, groups, strict=True)
    ]
    return mark_safe("".join(wrapped))  # noqa: S308 - every piece built by format_html


def _svg(css: str, width: int, height: int, title: str, body: SafeString, *, linked: bool) -> SafeString:
    # A chart of links is a group a screen reader enters; a plain one is a single image.
    role = "group" if linked else "img"
    return format_html(
        '<svg class="{}" viewBox="0 0 {} {}" role="{}" aria-label="{}" xmlns="http://www.w3.org/2000/svg">'
        "<title>{}</title>{}</svg>",
        css,
        width,
        height,
        role,
        title,
        title,
        body,
    )


def buckets(since: datetime, until: datetime, *, hourly: bool) -> list[datetime]:
    """Every day (or hour) from `since` to `until`, so quiet periods show as zero."""
    step = timedelta(hours=1) if hourly else timedelta(days=1)
    start = since.replace(minute=0, second=0, microsecond=0)
    if not hourly:
        start = start.replace(hour=0)
    out = []
    while start <= until:
        out.append(start)
        start += step
    return out


def time_chart(
    points: list[tuple[datetime, str, int]],
    *,
    causes: tuple[str, ...],
    since: datetime,
    until: datetime,
    hourly: bool,
    title: str,
    link: Callable[[datetime, datetime, str], str] | None = None,
) -> SafeString:
    """Columns per day/hour, zero-filled, stacked by cause, first, middle and last dates labelled.

    - `points`: (bucket, cause, count); `causes` in stacking order, bottom first.
    - `link(start, end, cause)`: each piece of a column opens the audit rows behind it.
    """
    counts: dict[tuple[datetime, str], int] = {}
    for moment, cause, n in points:
        key = (moment.replace(tzinfo=None), cause)
        counts[key] = counts.get(key, 0) + n
    slots = buckets(since, until, hourly=hourly)
    totals = [sum(counts.get((slot.replace(tzinfo=None), c), 0) for c in causes) for slot in slots]
    top = max(totals, default=0) or 1
    chart_h, base = 120, 130
    step = TIME_WIDTH / max(1, len(slots))
    span = timedelta(hours=1) if hourly else timedelta(days=1)
    width = f"{max(1.0, step - 2):.1f}"
    pieces = []
    for index, slot in enumerate(slots):
        label = slot.strftime("%d %b %H:00" if hourly else "%d %b")
        x, y = f"{index * step + 1:.1f}", float(base)
        for cause in causes:
            value = counts.get((slot.replace(tzinfo=None), cause), 0)
            if not value:
                continue
            h = chart_h * value / top
            y -= h
            href = link(slot, slot + span, cause) if link is not None else ""
            pieces.append((href, label, cause, value, slug(cause), x, f"{y:.1f}", width, f"{h:.1f}"))
    if link is not None:
        body = format_html_join(
            "",
            '<a href="{}"><title>{}, {}: {} denials, in the audit log</title>'
            '<rect class="chart-col cause-{}" x="{}" y="{}" width="{}" height="{}"></rect></a>',
            pieces,
        )
    else:
        body = format_html_join(
            "",
            '<rect class="chart-col cause-{}" x="{}" y="{}" width="{}" height="{}"><title>{}, {}: {}</title></rect>',
            ((p[4], p[5], p[6], p[7], p[8], p[1], p[2], p[3]) for p in pieces),
        )
    ticks = [0, len(slots) // 2, len(slots) - 1] if len(slots) > 2 else list(range(len(slots)))
    anchors = ["start", "middle", "end"] if len(ticks) == 3 else ["start"] * len(ticks)
    labels = format_html_join(
        "",
        '<text class="chart-axis" x="{}" y="148" text-anchor="{}">{}</text>',
        (
            (_tick_x(t, a, step), a, slots[t].strftime("%d %b %H:00" if hourly else "%d %b"))
            for t, a in zip(ticks, anchors, strict=True)
        ),
    )
    axis = mark_safe(f'<line class="chart-base" x1="0" y1="{base}" x2="{TIME_WIDTH}" y2="{base}"></line>')  # noqa: S308
    peak = format_html(
        '<text class="chart-axis" x="0" y="10">max {} a {}</text>', max(totals, default=0), "hour" if hourly else "day"
    )
    return format_html(
        '<svg class="chart chart-time" viewBox="0 0 {} 152" role="{}" aria-label="{}" xmlns="http://www.w3.org/2000/svg">'
        "<title>{}</title>{}{}{}{}</svg>",
        TIME_WIDTH,
        "group" if link is not None else "img",
        title,
        title,
        body,
        axis,
        labels,
        peak,
    )


def slug(cause: str) -> str:
    """A cause as a CSS class suffix: "safety check" -> "safety-check"."""
    return cause.replace(" ", "-")


def _tick_x(index: int, anchor: str, step: float) -> str:
    offset = {"start": 0.0, "middle": step / 2, "end": step}[anchor]
    return f"{min(TIME_WIDTH, index * step + offset):.1f}"
