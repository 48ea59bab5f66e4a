"""Push routes under /api/v1/ (docs/API.md)."""

from django.urls import path

from relay.push import api

urlpatterns = [
    path("push/vapid-public-key", api.PushVapidKeyApi.as_view(), name="api-push-vapid-key"),
    path("push-subscriptions", api.PushSubscriptionCreateApi.as_view(), name="api-push-subscriptions"),
    path(
        "push-subscriptions/<int:subscription_id>",
        api.PushSubscriptionDeleteApi.as_view(),
        name="api-push-subscription",
    ),
    path("push-actions/<str:token>", api.PushActionApi.as_view(), name="api-push-action"),
]
