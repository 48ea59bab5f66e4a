"""The API's JSON parser: size-limited and strict, so bad bodies are 4xx, never 500."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from approvals import strict_json
from approvals.api.errors import PayloadTooLarge


def _finite_float(text: str) -> float:
    value = float(text)
    # `1e400` parses to inf, which no JSON column can store back.
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_limited(stream: IO[bytes], limit: int) -> bytes:
    """Read at most `limit` bytes; raise PayloadTooLarge if the body is longer.

    DRF reads the request stream directly, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE never
    applies, and a chunked body has no Content-Length to check up front.
    """
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(f"The body is larger than the {limit // 1024} KiB limit; send less.")
    return data


class LimitedJSONParser(parsers.JSONParser):
    def parse(
        self, stream: IO[bytes] | None, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        if stream is None:
            return {}
        limit = settings.GATEHOUSE_MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if length and str(length).isdigit() and int(length) > limit:
            raise PayloadTooLarge(f"The body is larger than the {limit // 1024} KiB limit; send less.")
        raw = read_limited(stream, limit)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"the body must be UTF-8 ({exc.reason} at byte {exc.start})") from None
        try:
            return strict_json.loads(text, parse_float=_finite_float, parse_constant=_no_constants)
        except RecursionError:
            raise ParseError("JSON nested too deeply") from None
        except ValueError as exc:
            raise ParseError(str(exc)) from None
