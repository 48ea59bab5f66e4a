"""The chat-route API, mounted under /api/v1/ by `gatehouse/urls.py`."""

from django.urls import path

from approvals.api.longpoll import api_route
from relay.bridges import api

urlpatterns = [
    path("teams/<slug:team>/chat-routes", api.ChatRouteListApi.as_view(), name="api-chat-routes"),
    path(
        "teams/<slug:team>/chat-routes/<str:surface>",
        api_route({"put": api.ChatRouteUpdateApi, "delete": api.ChatRouteDeleteApi}, api.ChatRouteItemApi),
        name="api-chat-route",
    ),
]
