"""Partition assignors' names (the assignors themselves follow)."""

ASSIGNOR_NAMES = {"range": "range", "roundrobin": "roundrobin", "sticky": "sticky",
                  "cooperative-sticky": "cooperative-sticky",
                  "org.apache.kafka.clients.consumer.RangeAssignor": "range",
                  "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
                  "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
                  "org.apache.kafka.clients.consumer.CooperativeStickyAssignor":
                      "cooperative-sticky"}


def assignor_name(name: str) -> str:
    try:
        return ASSIGNOR_NAMES[name.strip()]
    except KeyError:
        raise ValueError(f"partition.assignment.strategy {name!r}: expected one of "
                         "range, roundrobin, sticky, cooperative-sticky") from None
