"""The ``schema`` label of a process that serves one schema (``--schema``): added to every
sample as it is served, so that two apps of one database scraped side by side never sum
into one series. The metrics themselves are defined without it.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

SCHEMA_LABEL = "schema"


class SchemaLabelled(Collector):
    """Every metric of ``source``, each sample labelled ``schema="<schema>"``."""

    def __init__(self, source: CollectorRegistry, schema: str) -> None:
        self._source = source
        self._schema = schema

    def collect(self) -> Iterator[Metric]:
        for family in self._source.collect():
            labelled = Metric(family.name, family.documentation, family.type, family.unit)
            labelled.samples = [
                sample._replace(labels={**sample.labels, SCHEMA_LABEL: self._schema})
                for sample in family.samples
            ]
            yield labelled


def served_registry(source: CollectorRegistry, schema: str | None) -> CollectorRegistry:
    """What to serve: ``source`` itself, or with the schema label when one is named."""
    if schema is None:
        return source
    labelled = CollectorRegistry(auto_describe=False)
    labelled.register(SchemaLabelled(source, schema))
    return labelled
