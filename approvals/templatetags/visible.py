"""Template filters that keep hidden characters visible in text a card shows (approvals.invisible)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from approvals.invisible import reveal as reveal_text
from approvals.invisible import spelled_out

register = template.Library()


@register.filter
def reveal(value: object) -> SafeString:
    """The text escaped, each hidden character a visible marker (for element content)."""
    return reveal_text(str(value))


@register.filter
def spelled(value: object) -> str:
    """The text with each hidden character spelled ⟨NAME⟩ (for attributes; escaped by the template)."""
    return spelled_out(str(value))
