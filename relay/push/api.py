"""The push API: the VAPID key, subscriptions (as the person), and the notification buttons."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from approvals.api.common import ApiView, IsPerson, StrictSerializer
from approvals.api.errors import error_body
from relay.push import services, vapid

ERROR = inline_serializer(
    "PushError",
    {
        "error": inline_serializer(
            "PushErrorBody", {"code": serializers.CharField(), "message": serializers.CharField()}
        )
    },
)


class PushVapidKeyApi(ApiView):
    permission_classes = [AllowAny]  # public by nature: every browser needs it to subscribe

    @extend_schema(
        operation_id="push_vapid_public_key",
        responses={200: inline_serializer("VapidPublicKey", {"public_key": serializers.CharField()})},
        description="The server's VAPID public key (base64url), for `pushManager.subscribe({applicationServerKey})`.",
    )
    def get(self, request: Request) -> Response:
        return Response({"public_key": vapid.public_key()})


class PushSubscriptionCreateApi(ApiView):
    permission_classes = [IsPerson]

    class KeysSerializer(StrictSerializer):
        p256dh = serializers.CharField(max_length=200)
        auth = serializers.CharField(max_length=100)

        class Meta:
            ref_name = "PushSubscriptionKeys"

    class InputSerializer(StrictSerializer):
        endpoint = serializers.CharField(max_length=2000)
        keys = serializers.JSONField()
        expirationTime = serializers.JSONField(required=False, allow_null=True)

        class Meta:
            ref_name = "PushSubscriptionInput"

        def validate_keys(self, value: Any) -> dict[str, str]:
            keys = PushSubscriptionCreateApi.KeysSerializer(data=value)
            keys.is_valid(raise_exception=True)
            return dict(keys.validated_data)

    @extend_schema(
        operation_id="push_subscriptions_create",
        request=InputSerializer,
        responses={201: inline_serializer("PushSubscriptionCreated", {"id": serializers.IntegerField()}), 400: ERROR},
        description="Keep a browser's PushSubscription (its JSON as `subscription.toJSON()` gives it) for the "
        "person calling. The endpoint must name a push service in GATEHOUSE_PUSH_SERVICES.",
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            subscription = services.subscription_save(
                user=request.user,  # type: ignore[arg-type]  # IsPerson: a User
                endpoint=data["endpoint"],
                p256dh=data["keys"]["p256dh"],
                auth=data["keys"]["auth"],
                user_agent=request.headers.get("User-Agent", ""),
            )
        except services.SubscriptionRefused as exc:
            raise exceptions.ValidationError({"endpoint": [str(exc)]}) from None
        return Response({"id": subscription.pk}, status=201)


class PushSubscriptionDeleteApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(operation_id="push_subscriptions_delete", responses={204: None, 404: ERROR})
    def delete(self, request: Request, subscription_id: int) -> Response:
        if not services.subscription_delete(user=request.user, subscription_id=subscription_id):  # type: ignore[arg-type]
            raise exceptions.NotFound("You have no push subscription with that id.")
        return Response(status=204)


class PushActionApi(ApiView):
    """A notification button: the token is the whole authority (no session, no CSRF)."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    class InputSerializer(StrictSerializer):
        behavior = serializers.ChoiceField(choices=["allow", "deny"], required=False)

        class Meta:
            ref_name = "PushActionInput"

    @extend_schema(
        operation_id="push_actions_decide",
        request=InputSerializer,
        responses={
            200: inline_serializer(
                "PushActionDecided",
                {
                    "request_id": serializers.UUIDField(),
                    "behavior": serializers.CharField(),
                    "decided_by": serializers.CharField(allow_null=True),
                    "message": serializers.CharField(),
                    "quorum": serializers.JSONField(required=False),
                },
            ),
            400: ERROR,
            403: ERROR,
            404: ERROR,
            409: ERROR,
            410: ERROR,
            503: ERROR,
        },
        description="Decide the token's action (allow or deny) on its request, as the person it was issued to. "
        "A body may repeat `behavior`; a different one is a 400. 409 when someone decided first; 410 when "
        "the token was used or the ask expired. An approval of a call that needs several people's is counted "
        "(200, `decided_by` null, `quorum` says how far it got) and the call stays pending.",
    )
    def post(self, request: Request, token: str) -> Response:
        serializer = self.InputSerializer(data=request.data if request.data else {})
        serializer.is_valid(raise_exception=True)
        outcome = services.action_redeem(token=token, behavior=serializer.validated_data.get("behavior"))
        if outcome.status == 200 and outcome.request is not None and outcome.decision is not None:
            body = {
                "request_id": str(outcome.request.pk),
                "behavior": outcome.decision.behavior,
                "decided_by": outcome.decision.decided_by,
                "message": outcome.message,
            }
            return Response(body, status=200)
        if outcome.status == 200 and outcome.request is not None:  # a vote counted toward a quorum
            vote: dict[str, Any] = {
                "request_id": str(outcome.request.pk),
                "behavior": "allow",
                "decided_by": None,
                "message": outcome.message,
                "quorum": outcome.quorum,
            }
            return Response(vote, status=200)
        extra: dict[str, Any] = {}
        if outcome.decision is not None:
            extra = {"decided_by": outcome.decision.decided_by, "surface": outcome.decision.surface}
        return Response(error_body(outcome.code, outcome.message, **extra), status=outcome.status)
