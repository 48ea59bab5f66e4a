"""The request card's template engine writes what Django's engine wrote.

The card is rendered by Jinja2 (`gatehouse.jinja`) with its autoescape off and Django's
escaping as `finalize`: every `{{ … }}` passes through `escape`. These tests hold that
function and the card's `date` filter to Django's own, over generated values, so that
no text an agent sends is written unescaped and no moment is shown differently on a
pushed card than Django's engine showed it.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import Any

from django.template import defaultfilters
from django.utils import timezone
from django.utils.functional import lazystr
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe
from hypothesis import given
from hypothesis import strategies as st

from gatehouse import jinja

# Text an agent may send: markup, quotes, ampersands, entities, controls and the rest.
HOSTILE = st.lists(st.sampled_from([*"<>&\"'`=/ ;#x0\n\t\u00a0\u202e\u200b", "&amp;", "&#39;", "<script>"])).map(
    "".join
)
VALUES = st.one_of(
    st.text(),
    HOSTILE,
    st.integers(),
    st.floats(allow_nan=False),
    st.none(),
    st.booleans(),
    st.uuids(),
)
ZONES = ["UTC", "Europe/Berlin", "America/St_Johns", "Asia/Kathmandu", "Pacific/Chatham"]
# Every format the card writes a moment in (templates/jinja2/approvals/card.html).
FORMATS = ["c", "j M Y, H:i:s e", "H:i:s e"]


class EscapeTests:
    @given(value=VALUES)
    def test_it_escapes_as_django_does(self, value: Any) -> None:
        assert jinja.escape(value) == str(conditional_escape(value))

    @given(text=HOSTILE)
    def test_no_markup_survives_unless_marked_safe(self, text: str) -> None:
        written = jinja.escape(text)
        assert "<" not in written and ">" not in written and '"' not in written and "'" not in written
        assert jinja.escape(mark_safe(text)) == text  # noqa: S308 - what the test marks safe is what it checks
        assert jinja.escape(lazystr(text)) == str(conditional_escape(lazystr(text)))

    def test_it_writes_undefined_as_nothing(self) -> None:
        template = jinja.environment().from_string("[{{ missing }}][{{ card.missing.deeper }}]")
        assert template.render(card={}) == "[][]"

    @given(text=HOSTILE)
    def test_every_output_of_a_template_is_escaped(self, text: str) -> None:
        template = jinja.environment().from_string('<p title="{{ t }}">{{ t|truncatechars(8) }}{{ t ~ t }}</p>')
        expected = conditional_escape(text)
        assert template.render(t=text) == (
            f'<p title="{expected}">{conditional_escape(defaultfilters.truncatechars(text, 8))}'
            f"{conditional_escape(text + text)}</p>"
        )


class DateTests:
    @given(
        moment=st.datetimes(
            min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2200, 1, 1), timezones=st.just(dt.UTC)
        ),
        zone=st.sampled_from(ZONES),
    )
    def test_it_shows_a_moment_as_djangos_date_filter_does(self, moment: dt.datetime, zone: str) -> None:
        with timezone.override(zoneinfo.ZoneInfo(zone)):
            for fmt in FORMATS:
                assert jinja.date(moment, fmt) == defaultfilters.date(timezone.template_localtime(moment), fmt)  # type: ignore[attr-defined]

    def test_no_moment_is_nothing(self) -> None:
        assert jinja.date(None, "c") == defaultfilters.date(None, "c") == ""
