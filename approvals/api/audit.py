"""The audit log over HTTP: filtered, cursor-paginated, exportable as CSV or JSON lines."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import selectors
from approvals.api.common import ApiView, IsPerson, QuerySerializer
from approvals.api.shapes import ErrorSerializer
from approvals.models import Decision

# A cursor's position is an audit row id; anything else (or past a 64-bit id) was not ours.
ROW_ID = re.compile(r"[0-9]{1,18}")

# Rows per database round trip and per thread hop of an export; a batch is held in memory.
EXPORT_BATCH = 2000
# Spreadsheet programs run a cell that starts with one of these as a formula.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


class AuditRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    request_id = serializers.UUIDField()
    agent = serializers.CharField(source="agent.name")
    session_id = serializers.CharField()
    tool_name = serializers.CharField()
    tool_input = serializers.JSONField(source="request.tool_input")
    behavior = serializers.CharField()
    message = serializers.CharField()
    updated_input = serializers.JSONField(allow_null=True)
    reason_type = serializers.CharField()
    reason = serializers.JSONField()
    rule = serializers.CharField()
    rule_source = serializers.CharField()
    decided_by = serializers.CharField()
    surface = serializers.CharField()
    latency_ms = serializers.FloatField()
    prev_hash = serializers.CharField()
    hash = serializers.CharField()

    class Meta:
        ref_name = "AuditRow"


CSV_COLUMNS = list(AuditRowSerializer().fields)


def csv_cell(value: Any) -> str:
    """One CSV cell, defused against formula injection (OWASP: prefix with a quote)."""
    if value is None:
        text = ""
    elif isinstance(value, dict | list):
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    else:
        text = str(value)
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


class _Line:
    """A file-like object whose write returns the line, so csv.writer can stream."""

    def write(self, value: str) -> str:
        return value


# Where each exported column is read from, for `values_list()`: the same sources as the
# serializer's, without building a model and a serializer per row.
EXPORT_SOURCES = ["__".join(field.source_attrs) for field in AuditRowSerializer().fields.values()]


def _exported(cells: tuple[Any, ...], fields: list[serializers.Field]) -> list[Any]:
    """One row as the serializer would represent it, column by column."""
    pairs = zip(cells, fields, strict=True)
    return [None if value is None else field.to_representation(value) for value, field in pairs]


def _export_fields() -> list[serializers.Field]:
    """The serializer's fields, the time zone looked up once per export instead of per row."""
    fields = list(AuditRowSerializer().fields.values())
    for field in fields:
        if isinstance(field, serializers.DateTimeField) and settings.USE_TZ:
            field.timezone = timezone.get_current_timezone()  # what DRF looks up per value
    return fields


def _batches(rows: QuerySet[Decision], fmt: str) -> Iterator[str]:
    """The export as text, one keyset page of rows at a time: memory stays bounded by one batch."""
    fields = _export_fields()
    writer = csv.writer(_Line())
    cells = rows.values_list(*EXPORT_SOURCES)
    before: int | None = None
    while True:
        page = cells if before is None else cells.filter(id__lt=before)
        batch = list(page.order_by("-id")[:EXPORT_BATCH])
        if not batch:
            return
        exported = (_exported(row, fields) for row in batch)
        if fmt == "csv":
            yield "".join(writer.writerow([csv_cell(value) for value in row]) for row in exported)
        else:
            rows_as_dicts = (dict(zip(CSV_COLUMNS, row, strict=True)) for row in exported)
            yield "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in rows_as_dicts)
        before = batch[-1][0]  # the id: the serializer's first field


async def _export(rows: QuerySet[Decision], fmt: str) -> AsyncIterator[str]:
    # An async iterator: under ASGI Django would otherwise buffer a sync one whole, and
    # each batch is read and formatted on a worker thread, one hop per batch, so the
    # export never blocks the server.
    batches = _batches(rows, fmt)
    next_batch = sync_to_async(lambda: next(batches, None))
    if fmt == "csv":
        yield csv.writer(_Line()).writerow(CSV_COLUMNS)
    while (text := await next_batch()) is not None:
        yield text


class AuditListApi(ApiView):
    permission_classes = [IsPerson]

    class FilterSerializer(QuerySerializer):
        q = serializers.CharField(
            max_length=200,
            required=False,
            help_text="Case-insensitive substring of the command, target (path, URL, pattern…), rule or message",
        )
        agent = serializers.CharField(max_length=100, required=False)
        session = serializers.CharField(max_length=200, required=False)
        tool = serializers.CharField(max_length=200, required=False)
        behavior = serializers.ChoiceField(choices=["allow", "deny"], required=False)
        reason_type = serializers.CharField(max_length=32, required=False)
        rule = serializers.CharField(max_length=4096, required=False)
        decided_by = serializers.CharField(max_length=150, required=False)
        surface = serializers.CharField(max_length=32, required=False)
        since = serializers.DateTimeField(required=False, help_text="ISO 8601, inclusive")
        until = serializers.DateTimeField(required=False, help_text="ISO 8601, exclusive")
        format = serializers.ChoiceField(choices=["json", "csv", "jsonl"], required=False, default="json")
        cursor = serializers.CharField(required=False)
        page_size = serializers.IntegerField(required=False, min_value=1, max_value=1000)

        class Meta:
            ref_name = "AuditFilter"

    class Pagination(CursorPagination):
        ordering = "-id"
        page_size = 100
        page_size_query_param = "page_size"
        max_page_size = 1000

        def decode_cursor(self, request: Request) -> Cursor | None:
            """A cursor this server gave out, or 400: a tampered position must never reach the query."""
            try:
                cursor = super().decode_cursor(request)
            except NotFound:
                cursor = None
                valid = False
            else:
                valid = cursor is None or cursor.position is None or bool(ROW_ID.fullmatch(str(cursor.position)))
            if not valid:
                raise ValidationError({"cursor": ["not a cursor this server gave out"]})
            return cursor

    @extend_schema(
        operation_id="audit_list",
        parameters=[FilterSerializer],
        responses={
            (200, "application/json"): AuditRowSerializer(many=True),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="format=csv"),
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="format=jsonl"),
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
        },
        description="The audit log of your teams, newest first (people only). Cursor-paginated as JSON; "
        "`format=csv` or `format=jsonl` streams every matching row.",
    )
    def get(self, request: Request) -> Response | StreamingHttpResponse:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = dict(filters.validated_data)
        fmt = data.pop("format")
        rows = selectors.audit_rows(data, request.user)
        if fmt in ("csv", "jsonl"):
            content_type = "text/csv; charset=utf-8" if fmt == "csv" else "application/x-ndjson"
            response = StreamingHttpResponse(_export(rows, fmt), content_type=content_type)
            response["Content-Disposition"] = f'attachment; filename="gatehouse-audit.{fmt}"'
            return response
        paginator = self.Pagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        return paginator.get_paginated_response(AuditRowSerializer(page, many=True).data)
