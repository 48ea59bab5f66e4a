"""ASGI entry point: Django over HTTP, Channels over WebSocket, both served by Daphne."""

import os
from typing import Any

from gatehouse.handler import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatehouse.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from gatehouse.bodylimit import BodySizeLimit  # noqa: E402
from gatehouse.health import HealthProbes  # noqa: E402
from relay.routing import websocket_urlpatterns  # noqa: E402

websocket_routes = list(websocket_urlpatterns)
if os.environ.get("GATEHOUSE_BENCH") == "1":
    # The benchmarks' bare WebSocket echo (the push figures' baseline); never mounted otherwise.
    from bench.echo import websocket_urlpatterns as bench_routes

    websocket_routes += bench_routes

application: Any = ProtocolTypeRouter(
    {
        "http": HealthProbes(BodySizeLimit(django_asgi_app, settings.GATEHOUSE_MAX_BODY_BYTES)),
        "websocket": URLRouter(websocket_routes),
    }
)
if settings.GATEHOUSE_INPROCESS_SWEEPER:
    from relay.sweeper import InProcessSweeper

    application = InProcessSweeper(application)

# What is loaded by now lives as long as the process: the garbage collector's full
# passes need not walk it again and again. Loading the URLconf first (its views, their
# serializers and templates' code) brings most of what a first request would.
import gc  # noqa: E402

from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018
gc.freeze()
