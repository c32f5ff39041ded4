"""What `/metrics` shows: collectors that read the runtime's own counters at each scrape.

Nothing here runs per message: a scrape reads the counters the runtime keeps anyway
([`RuntimeStats`][aun_runtime.RuntimeStats], the worker's and the host's stats, the model calls of
`aun_runtime.models`) and turns them into Prometheus families. The one thing measured only for
`/metrics` is how long turns take, and only once a `RuntimeMetrics` is made for the runtime.
No family has a per-AID label: a million AIDs are still a handful of series. The table of every
family is on the docs' page Operating.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..api._runtime import AUNRuntime
from ..base._histogram import TURN_BUCKETS, DurationHistogram
from ..models._call_stats import MODEL_CALLS, ModelCallStats

__all__ = ["CountersCollector", "ModelMetrics", "RuntimeMetrics", "histogram_family"]


def histogram_family(name: str, documentation: str, histograms: Iterable[tuple[list[str], DurationHistogram]],
                     labels: list[str] | None = None) -> HistogramMetricFamily:
    """A Prometheus histogram family from our histograms, one per label values."""
    family = HistogramMetricFamily(name, documentation, labels=labels or [])
    for values, histogram in histograms:
        family.add_metric(values, histogram.cumulative(), histogram.sum)
    return family


class RuntimeMetrics(Collector):
    """An [`AUNRuntime`][aun_runtime.AUNRuntime]'s deliveries, sends, failures, mailboxes and turns."""

    def __init__(self, runtime: AUNRuntime) -> None:
        self.runtime = runtime
        if runtime.turns.durations is None:  # measured from now on (it costs a clock read a turn)
            runtime.turns.durations = DurationHistogram(TURN_BUCKETS)

    def busy_report(self) -> list[dict[str, Any]]:
        """Each busy agent of the runtime, as plain values (what `GET /busy` serves)."""
        return [agent.as_dict() for agent in self.runtime.busy()]

    def collect(self) -> Iterator[Metric]:
        runtime = self.runtime
        stats = runtime.stats
        for name, value, text in (
            ("aun_deliveries", stats.delivered, "Messages delivered to an agent's handler."),
            ("aun_sends", stats.sent, "Messages sent by agents and inboxes of this runtime."),
            ("aun_filtered", stats.filtered, "Messages filtered by a channel (archived, not delivered)."),
            ("aun_duplicates", stats.duplicates, "Duplicate messages dropped by a channel."),
            ("aun_loop_stops", stats.loop_stops, "Sends refused by the hop guard."),
            ("aun_budget_stops", stats.budget_stops, "Sends and model calls refused by a budget."),
            ("aun_handler_timeouts", stats.handler_timeouts, "Turns cut off at their handler timeout."),
        ):
            yield CounterMetricFamily(name, text, value=value)
        dead = CounterMetricFamily(
            "aun_dead_letters", "Messages that could not be delivered or handled, by error class.", labels=["reason"]
        )
        for reason, count in sorted(stats.dead_letter_reasons.items()):
            dead.add_metric([reason], count)
        yield dead
        endpoints = runtime.placement.endpoints
        yield GaugeMetricFamily("aun_agents", "Local AIDs registered in this runtime.", value=len(endpoints))
        yield GaugeMetricFamily(
            "aun_mailbox_messages", "Messages waiting in, or being handled from, the local mailboxes.",
            value=sum(endpoint.waiting for endpoint in endpoints.values()),
        )
        turns = runtime.turns
        yield GaugeMetricFamily("aun_turns_in_flight", "Turns running now.", value=len(turns.in_flight))
        yield from _busy_families(runtime)
        if turns.durations is not None:
            yield histogram_family("aun_turn_duration_seconds", "How long turns took.", [([], turns.durations)])


#: What a turn in flight may wait for (`Turn.wait_for`): each is a series of `aun_turns_waiting`, 0 or not.
WAITS = ("model limiter", "model", "tool", "retry")


def _busy_families(runtime: AUNRuntime) -> Iterator[Metric]:
    """The busy agents in a few series (`runtime.busy()` per agent is `GET /busy`)."""
    try:
        busy = runtime.busy()
    except RuntimeError:  # read outside the event loop (a registry describing itself): nothing in flight to see
        busy = []
    yield GaugeMetricFamily(
        "aun_agents_busy", "Agents with a turn in flight or messages in their mailbox.", value=len(busy)
    )
    waiting = GaugeMetricFamily("aun_turns_waiting", "Turns in flight waiting, by what they wait for.", labels=["for"])
    for what in WAITS:
        waiting.add_metric([what], sum(1 for agent in busy if agent.waiting_for == what))
    yield waiting
    yield GaugeMetricFamily(
        "aun_turn_longest_seconds", "How long the longest turn in flight has run (0: none).",
        value=max((agent.turn_seconds or 0.0 for agent in busy), default=0.0),
    )
    yield GaugeMetricFamily(
        "aun_mailbox_oldest_seconds", "The age of the oldest message being handled (0: none).",
        value=max((agent.oldest_seconds or 0.0 for agent in busy), default=0.0),
    )


class ModelMetrics(Collector):
    """The model calls of this process: counts by model and outcome, tokens, durations."""

    def __init__(self, stats: ModelCallStats = MODEL_CALLS) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        calls = CounterMetricFamily("aun_model_calls", "Model calls, by model and outcome.", labels=["model", "outcome"])
        for (model, outcome), count in sorted(stats.calls.items()):
            calls.add_metric([model, outcome], count)
        yield calls
        tokens = CounterMetricFamily(
            "aun_model_tokens", "Tokens of model calls, by model and direction (input, output).",
            labels=["model", "direction"],
        )
        for (model, direction), count in sorted(stats.tokens.items()):
            tokens.add_metric([model, direction], count)
        yield tokens
        yield histogram_family(
            "aun_model_call_duration_seconds", "How long model calls took, by model.",
            [([model], histogram) for model, histogram in sorted(stats.durations.items())], labels=["model"],
        )


class CountersCollector(Collector):
    """Families read from a stats object: each `(name, kind, documentation, read)`, where `kind` is
    `counter` or `gauge` and `read(stats)` is the value (for the host's and the worker's stats)."""

    def __init__(self, stats: Callable[[], Any], families: list[tuple[str, str, str, Callable[[Any], float]]]) -> None:
        self.stats = stats
        self.families = families

    def collect(self) -> Iterator[Metric]:
        stats = self.stats()
        for name, kind, text, read in self.families:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, text, value=read(stats))
