from django.apps import AppConfig


class RelayConfig(AppConfig):
    name = "relay"
    verbose_name = "Relay"

    def ready(self) -> None:
        # relay plugs its claim store, announcers and pre-decision providers into the
        # approvals services here; approvals never imports relay.
        from relay import origins, wiring

        origins.check_settings()

        wiring.install()
