"""A person's own personal API tokens: list them, revoke one (a leaked token, from a script).

`GET /api/v1/tokens`, `DELETE /api/v1/tokens/{id}`. Only one's own: another person's
token id is a 404, exactly like an id that does not exist.
"""

from __future__ import annotations

import hmac
from typing import Any, cast

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import selectors, services
from approvals.api.common import ApiView, IsPerson
from approvals.api.rules import ERRORS
from approvals.models import PersonalToken
from approvals.services import token_hash


class TokenOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    prefix = serializers.CharField(source="token_prefix", help_text="the token's first characters")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True, help_text="null: until revoked")
    revoked_at = serializers.DateTimeField(allow_null=True)
    current = serializers.SerializerMethodField(help_text="the token this request was made with")

    class Meta:
        ref_name = "PersonalToken"

    def get_current(self, token: PersonalToken) -> bool:
        current = self.context.get("current_hash")
        return current is not None and hmac.compare_digest(token.token_hash, current)


def _context(request: Request) -> dict[str, Any]:
    used = request.auth if isinstance(request.auth, str) else None
    return {"current_hash": token_hash(used) if used else None}


class PersonalTokenListApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(
        operation_id="tokens_list",
        responses={200: TokenOutputSerializer(many=True), **ERRORS},
        description="The caller's own personal API tokens, newest first (never the token itself).",
    )
    def get(self, request: Request) -> Response:
        tokens = selectors.personal_tokens_of(request.user)
        return Response(TokenOutputSerializer(tokens, many=True, context=_context(request)).data)


class PersonalTokenRevokeApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(
        operation_id="tokens_destroy",
        responses={204: None, **ERRORS},
        description="Revoke one of the caller's own tokens at once (the one in use, too). "
        "404 for a token that is not the caller's, already revoked, or does not exist.",
    )
    def delete(self, request: Request, token_id: int) -> Response:
        if not services.personal_token_revoke_own(user=cast(User, request.user), token_id=token_id):  # IsPerson: a User
            raise exceptions.NotFound("You have no live token with that id.")
        return Response(status=204)
