"""The subscription list both ClusterPort implementations use."""

from vgpu.domain.node import ClusterNode
from vgpu.ports.cluster import Action, ClusterEvent, Kind, Subscribers

EVENT = ClusterEvent(Kind.NODE, Action.ADDED, ClusterNode(name="n"))


def test_handlers_are_delivered_in_order_until_they_unsubscribe() -> None:
    subscribers = Subscribers()
    seen: list[str] = []
    stop_a = subscribers.add(lambda e: seen.append("a"))
    subscribers.add(lambda e: seen.append("b"))
    for handler in subscribers.current():
        handler(EVENT)
    stop_a()
    stop_a()  # a second call changes nothing
    for handler in subscribers.current():
        handler(EVENT)
    assert seen == ["a", "b", "b"]


def test_a_handler_may_unsubscribe_while_an_event_is_delivered() -> None:
    subscribers = Subscribers()
    seen: list[str] = []
    stops = []

    def once(event: ClusterEvent) -> None:
        seen.append("once")
        stops[0]()

    stops.append(subscribers.add(once))
    subscribers.add(lambda e: seen.append("always"))
    for _ in range(2):
        for handler in subscribers.current():
            handler(EVENT)
    assert seen == ["once", "always", "always"]
