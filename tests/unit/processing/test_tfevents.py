"""TensorBoard event files written by hand: framing, checksums and protobuf, read back."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from lambdas.trace_processor.tfevents import (
    FILE_VERSION,
    TfRecordError,
    crc32c,
    masked_crc32c,
    read_event_file,
    scalar_event_file,
)


def test_crc32c_matches_the_standard_check_value() -> None:
    # GIVEN the CRC-32C check input WHEN hashed THEN it gives the published check value (RFC 3720)
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_masked_crc_is_tensorflows_rotation_plus_delta() -> None:
    crc = crc32c(b"abc")
    assert masked_crc32c(b"abc") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_event_file_round_trips_scalars_and_steps() -> None:
    # GIVEN job-level scalars and per-step values WHEN written and read back
    data = scalar_event_file(
        {101: {"profstack/step_time_ms": 96.5}, 102: {"profstack/step_time_ms": 97.25}},
        wall_time=1796565600.0,
        scalars={"profstack/GPUIdlePercent": 2.53, "profstack/TraceBytes": 1152519.0},
    )
    events = read_event_file(data)
    # THEN the first record is the version header, then job scalars at step 0, then one event per step
    assert events[0].file_version == FILE_VERSION
    assert events[1].step == 0
    assert events[1].scalars["profstack/GPUIdlePercent"] == pytest.approx(2.53, rel=1e-6)
    assert events[1].scalars["profstack/TraceBytes"] == pytest.approx(1152519.0)
    assert [(e.step, round(e.scalars["profstack/step_time_ms"], 2)) for e in events[2:]] == [(101, 96.5), (102, 97.25)]
    assert all(e.wall_time == 1796565600.0 for e in events)


def test_corrupt_record_is_detected() -> None:
    # GIVEN a valid file with one flipped payload byte WHEN read THEN the data checksum fails
    data = bytearray(scalar_event_file(None, wall_time=1.0, scalars={"a": 1.0}))
    data[-6] ^= 0xFF
    with pytest.raises(TfRecordError, match="checksum"):
        read_event_file(bytes(data))


def test_truncated_file_is_detected() -> None:
    data = scalar_event_file(None, wall_time=1.0, scalars={"a": 1.0})
    with pytest.raises(TfRecordError, match="truncated"):
        read_event_file(data[:-3])


def test_length_header_is_little_endian_u64() -> None:
    data = scalar_event_file(None, wall_time=1.0)
    (length,) = struct.unpack("<Q", data[:8])
    assert len(data) == 8 + 4 + length + 4


def test_tensorboard_reads_the_file_when_installed(tmp_path: Path) -> None:
    # GIVEN tensorboard's own reader (optional dependency) WHEN it loads our file THEN it sees the scalars
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    path = tmp_path / "events.out.tfevents.1796565600.profstack"
    path.write_bytes(scalar_event_file({5: {"s": 2.0}}, wall_time=1796565600.0, scalars={"x": 1.5}))
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert acc.Scalars("x")[0].value == pytest.approx(1.5)
    assert acc.Scalars("s")[0].step == 5
