"""TensorBoard scalar event files, written by hand (no TensorFlow/tensorboard dependency).

File = TFRecords; each record is
    uint64 length (LE) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
and `data` is a serialized `tensorflow.Event` protobuf:
    Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
    Summary { repeated Value value = 1; }
    Value   { string tag = 1; float simple_value = 2; }
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

FILE_VERSION = "brain.Event:2"
_MASK_DELTA = 0xA282EAD8


class TfRecordError(ValueError):
    """A record whose framing or checksum is wrong."""


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # protobuf int64: two's complement, 10 bytes
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint((field << 3) | wire_type)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def encode_event(
    *, wall_time: float, step: int = 0, scalars: Mapping[str, float] | None = None, file_version: str = ""
) -> bytes:
    out = _key(1, 1) + struct.pack("<d", wall_time)
    if step:
        out += _key(2, 0) + _varint(step)
    if file_version:
        out += _length_delimited(3, file_version.encode())
    if scalars:
        summary = b""
        for tag, value in scalars.items():
            val = _length_delimited(1, tag.encode()) + _key(2, 5) + struct.pack("<f", float(value))
            summary += _length_delimited(1, val)
        out += _length_delimited(5, summary)
    return out


def frame_record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def scalar_event_file(
    steps: Mapping[int, Mapping[str, float]] | None = None,
    *,
    wall_time: float,
    scalars: Mapping[str, float] | None = None,
) -> bytes:
    """A whole event file: the version header, then one event per step (or one at step 0)."""
    records = [frame_record(encode_event(wall_time=wall_time, file_version=FILE_VERSION))]
    if scalars:
        records.append(frame_record(encode_event(wall_time=wall_time, step=0, scalars=scalars)))
    for step, values in sorted((steps or {}).items()):
        records.append(frame_record(encode_event(wall_time=wall_time, step=step, scalars=values)))
    return b"".join(records)


# --- reading back (tests, and `profstack` debugging) ---------------------------------------------


@dataclass(frozen=True)
class ScalarEvent:
    wall_time: float
    step: int
    file_version: str
    scalars: dict[str, float]


def iter_records(data: bytes) -> Iterator[bytes]:
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise TfRecordError(f"truncated record header at byte {pos}")
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        if masked_crc32c(header) != length_crc:
            raise TfRecordError(f"length checksum mismatch at byte {pos}")
        start, end = pos + 12, pos + 12 + length
        if end + 4 > len(data):
            raise TfRecordError(f"truncated record at byte {pos}")
        payload = data[start:end]
        (data_crc,) = struct.unpack("<I", data[end : end + 4])
        if masked_crc32c(payload) != data_crc:
            raise TfRecordError(f"data checksum mismatch at byte {pos}")
        yield payload
        pos = end + 4


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise TfRecordError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
            yield field, wire, value
        elif wire == 1:
            yield field, wire, buf[pos : pos + 8]
            pos += 8
        elif wire == 5:
            yield field, wire, buf[pos : pos + 4]
            pos += 4
        elif wire == 2:
            length, pos = _read_varint(buf, pos)
            yield field, wire, buf[pos : pos + length]
            pos += length
        else:
            raise TfRecordError(f"unsupported wire type {wire}")


def decode_event(data: bytes) -> ScalarEvent:
    wall_time, step, version, scalars = 0.0, 0, "", {}
    for field, _wire, value in _fields(data):
        if field == 1 and isinstance(value, bytes):
            (wall_time,) = struct.unpack("<d", value)
        elif field == 2 and isinstance(value, int):
            step = value
        elif field == 3 and isinstance(value, bytes):
            version = value.decode()
        elif field == 5 and isinstance(value, bytes):
            for vfield, _vw, vbytes in _fields(value):
                if vfield != 1 or not isinstance(vbytes, bytes):
                    continue
                tag, number = "", 0.0
                for f, _w, v in _fields(vbytes):
                    if f == 1 and isinstance(v, bytes):
                        tag = v.decode()
                    elif f == 2 and isinstance(v, bytes):
                        (number,) = struct.unpack("<f", v)
                scalars[tag] = number
    return ScalarEvent(wall_time=wall_time, step=step, file_version=version, scalars=scalars)


def read_event_file(data: bytes) -> list[ScalarEvent]:
    return [decode_event(record) for record in iter_records(data)]
