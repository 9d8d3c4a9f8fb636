"""The trimmed Perfetto traces ProfStack writes, locally (`profstack analyze`) and in the Lambda."""

from __future__ import annotations

#: A trimmed trace meant for a viewer must stay well under ~500 MB of JSON (docs/platform-facts.md); Kineto
#: events average ~200-250 bytes, so one million events is ~250 MB before gzip.
MAX_EVENTS = 1_000_000
