"""WebSocket consumers, one module per protocol: agents submit calls and hear decisions; dashboards watch the queue.

Both follow the house rule for events: the channel layer is a doorbell, the database is
the truth. A consumer subscribes to its groups first, then reads the database, and
re-reads it whenever a doorbell rings (or on a slow timer, because the layer delivers
at most once), so a decision is never lost between a read and a subscribe.

`base` is what both share; `agent.AgentConsumer` and `dashboard.DashboardConsumer` are
routed in `relay/routing.py`.
"""

from relay.consumers.agent import AgentConsumer
from relay.consumers.dashboard import DashboardConsumer

__all__ = ["AgentConsumer", "DashboardConsumer"]
