"""Prometheus metrics. Each app has its own registry so that several backends can live in one test
process. No label value ever carries a secret: request names, states and status codes only."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from elastic_agent.pool.key_lifetime import KeyFigures
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.records import PodState
from profiles.fingerprint import label_form


class PodStateCollector(Collector):
    """Pods per state, read from the pools' watched caches at scrape time (never a stale gauge)."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "gocd_elastic_agent_pods", "Agent pods of this plugin by state", labels=["state"]
        )
        counts = self._counts()
        for state in PodState:
            family.add_metric([state.value], counts.get(state.value, 0))
        yield family


class RetainedEntriesCollector(Collector):
    """Entries each long-lived structure of the backend holds (Backend.sizes), read at scrape time: an
    operator sees a structure that keeps growing before the memory does."""

    def __init__(self, sizes: Callable[[], dict[str, int]], limits: Callable[[], dict[str, int]]) -> None:
        self._sizes = sizes
        self._limits = limits

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "gocd_elastic_agent_retained_entries",
            "Entries kept in memory by the backend, by structure (pool records, fingerprint book, caches)",
            labels=["structure"],
        )
        for structure, count in sorted(self._sizes().items()):
            family.add_metric([structure], count)
        yield family
        limits = GaugeMetricFamily(
            "gocd_elastic_agent_retained_entries_limit",
            "The capacity of the structures that have a fixed one (caches and queues)",
            labels=["structure"],
        )
        for structure, count in sorted(self._limits().items()):
            limits.add_metric([structure], count)
        yield limits


class PredictionCollector(Collector):
    """Predict's score (forecast/forecaster.py OUTCOMES), summed over pipelines, read at scrape time:
    pipeline names stay out of the label values, whose number must not grow with the configuration."""

    def __init__(self, totals: Callable[[], dict[str, int]]) -> None:
        self._totals = totals

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "gocd_elastic_agent_predicted_pods",
            "Pods started ahead of a predicted stage, by what became of them (started, hit: a job of that "
            "stage took it, other_job, idled_out: gone without a job, without_key: wanted, no banked key)",
            labels=["outcome"],
        )
        for outcome, count in self._totals().items():
            family.add_metric([outcome], count)
        yield family


class KeyCollector(Collector):
    """Registration keys, read at scrape time: the bank's memory and its bound, how long it keeps keys,
    the pods each profile (its fingerprint's label form: the label's values are bounded by the profiles
    that want pods ahead) wanted ahead and could not start for want of a key, by what wanted them, and
    the pods whose key GoCD refused, and of those the ones whose key had been spent. Never a key."""

    def __init__(self, bank: RegistrationKeys, pools: Callable[[], list[KeyFigures]]) -> None:
        self._bank = bank
        self._pools = pools

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        bank = self._bank
        yield GaugeMetricFamily("gocd_elastic_agent_key_bank_bytes",
                                "Memory the banked registration keys take", value=bank.memory_bytes())
        yield GaugeMetricFamily("gocd_elastic_agent_key_bank_limit_bytes",
                                "The most memory the key bank can take (its capacity of the longest keys)",
                                value=bank.memory_limit_bytes())
        yield GaugeMetricFamily("gocd_elastic_agent_key_bank_max_age_seconds",
                                "How long banked keys are kept: the longest any cluster profile may use one "
                                "(its auto_register_key_expiry less its auto_register_timeout)",
                                value=bank.max_age_s)  # fmt: skip
        pools = self._pools()
        lacking = GaugeMetricFamily(
            "gocd_elastic_agent_pods_wanted_without_key",
            "Pods wanted ahead of demand that could not start for want of a registration key, by profile "
            "and by what wanted them (warm_pool: MinIdlePods in force; predict)",
            labels=["profile", "reason"],
        )
        for pool in pools:
            for lacks in pool.lacking:
                for source, pods in sorted(lacks.pods.items()):
                    lacking.add_metric([label_form(lacks.fingerprint), source], pods)
        yield lacking
        yield CounterMetricFamily("gocd_elastic_agent_registration_keys_refused",
                                  "Pods whose agent GoCD refused for an unknown or expired registration key",
                                  value=sum(pool.refused_pods for pool in pools))  # fmt: skip
        yield CounterMetricFamily("gocd_elastic_agent_registration_keys_spent",
                                  "Of the pods whose key GoCD refused, those whose key had been spent before "
                                  "(refused for another cause first, or a restarted agent container), not "
                                  "expired", value=sum(pool.spent_pods for pool in pools))  # fmt: skip


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "gocd_elastic_agent_requests",
            "GoCD plugin requests answered, by request name and response code",
            ["request", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "gocd_elastic_agent_request_seconds",
            "Time to answer a GoCD plugin request",
            ["request"],
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.unauthorized = Counter(
            "gocd_elastic_agent_unauthorized_requests",
            "Requests refused for a missing or wrong token",
            registry=self.registry,
        )

    def watch_pods(self, counts: Callable[[], dict[str, int]]) -> None:
        self.registry.register(PodStateCollector(counts))

    def watch_predictions(self, totals: Callable[[], dict[str, int]]) -> None:
        self.registry.register(PredictionCollector(totals))

    def watch_structures(
        self, sizes: Callable[[], dict[str, int]], limits: Callable[[], dict[str, int]]
    ) -> None:
        self.registry.register(RetainedEntriesCollector(sizes, limits))

    def watch_keys(self, bank: RegistrationKeys, pools: Callable[[], list[KeyFigures]]) -> None:
        self.registry.register(KeyCollector(bank, pools))
