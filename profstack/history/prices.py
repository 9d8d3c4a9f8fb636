"""The pinned on-demand price table (``prices.json`` next to this file): USD per instance-hour and GPUs per
instance, keyed by SageMaker instance type, with its date, region and source. Never fetched at run time;
the config may override or add instance types (``history.prices``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any


class PriceTableError(ValueError):
    """The pinned table or an override is malformed."""


@dataclass(frozen=True)
class InstancePrice:
    gpus: int | None
    usd_per_hour: float | None


@dataclass(frozen=True)
class PriceTable:
    as_of: str
    region: str
    source: str
    verified: bool
    instances: Mapping[str, InstancePrice]
    #: instance types whose price or GPU count came from the config, not the pinned table
    overridden: frozenset[str] = field(default_factory=frozenset)

    def lookup(self, instance_type: str) -> InstancePrice | None:
        return self.instances.get(instance_type)

    def with_overrides(
        self, usd_per_hour: Mapping[str, float] | None = None, gpus: Mapping[str, int] | None = None
    ) -> PriceTable:
        """A copy with the config's prices and GPU counts applied (an unknown instance type is added)."""
        merged = dict(self.instances)
        touched: set[str] = set()
        for name, price in (usd_per_hour or {}).items():
            if not isinstance(price, int | float) or isinstance(price, bool) or price < 0:
                raise PriceTableError(f"price of {name}: {price!r} is not a number >= 0")
            old = merged.get(name, InstancePrice(None, None))
            merged[name] = InstancePrice(old.gpus, float(price))
            touched.add(name)
        for name, count in (gpus or {}).items():
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise PriceTableError(f"GPU count of {name}: {count!r} is not an integer >= 0")
            old = merged.get(name, InstancePrice(None, None))
            merged[name] = InstancePrice(count, old.usd_per_hour)
            touched.add(name)
        return PriceTable(
            self.as_of, self.region, self.source, self.verified, merged, frozenset(self.overridden | touched)
        )


def _parse(data: Mapping[str, Any]) -> PriceTable:
    try:
        instances = {
            str(name): InstancePrice(int(v["gpus"]), float(v["usd_per_hour"]))
            for name, v in dict(data["instances"]).items()
        }
        return PriceTable(
            as_of=str(data["as_of"]),
            region=str(data["region"]),
            source=str(data["source"]),
            verified=bool(data["verified"]),
            instances=instances,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PriceTableError(f"price table is malformed: {exc}") from None


@cache
def pinned_prices() -> PriceTable:
    """The table committed in ``profstack/history/prices.json``."""
    text = resources.files("profstack.history").joinpath("prices.json").read_text(encoding="utf-8")
    return _parse(json.loads(text))
