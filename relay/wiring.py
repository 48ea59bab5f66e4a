"""Plug the relay's claim store, announcers and pre-decision providers into approvals."""

from __future__ import annotations

from approvals.extensions import registry


def install() -> None:
    """Called once from `RelayConfig.ready()`."""
    from relay import claims, classifiers, fanout, observability, race, webhooks

    if registry.claim_store is None:
        registry.claim_store = claims.build_claim_store()
    registry.cards = fanout.CARDS
    registry.add_announcer(observability.ObservabilityAnnouncer())
    race.race.add(webhooks.PermissionRequestWebhooks())
    llm = classifiers.llm_classifier()
    if llm is not None:
        race.race.add(classifiers.ClassifierRacer(llm))
    registry.add_announcer(race.race)
    for provider in (webhooks.pre_decision, classifiers.classifier_verdict):
        if provider not in registry.pre_decision:
            registry.pre_decision.append(provider)
    # Web Push is always on: each person opts in by subscribing a browser; ntfy when configured.
    from relay.push import install as push_install

    push_install.install_push()
    # Chat bridges register themselves as announcers when their env variables are set.
    from relay.bridges.install import install_bridges

    install_bridges()
