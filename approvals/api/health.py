"""`GET /api/v1/health`: the no-op endpoint, the baseline the benchmarks compare against.

It passes through the same middleware, authentication (bearer token or session) and
rendering as every other API view and does nothing else, so the gap between it and a
real endpoint is the cost of the real work.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class HealthCheckApi(APIView):
    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()

    @extend_schema(responses=OutputSerializer, summary="Authenticated no-op (liveness and benchmark baseline)")
    def get(self, request: Request) -> Response:
        return Response(self.OutputSerializer({"ok": True}).data)
