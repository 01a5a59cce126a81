#!/usr/bin/env python3
"""tfevents_reader.py -- read a TensorBoard event file without TensorFlow.

Written from the format description alone (docs/formats.md), to check
trainctl's writer independently: every record is
    u64 LE length | u32 LE masked CRC32C of the 8 length bytes | data |
    u32 LE masked CRC32C of data
with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (32 bits).  data is a
protobuf Event: wall_time = 1 (double), step = 2 (int64), file_version = 3
(string), summary = 5 (Summary: repeated value = 1; Value: tag = 1 string,
simple_value = 2 float).

Usage: tfevents_reader.py FILE  -> prints JSON:
    {"file_version": "brain.Event:2", "points": [{"wall_time": .., "step": ..,
     "tag": .., "value": ..}, ...]}
NaN and infinities print as the strings "NaN", "Infinity", "-Infinity".
A bad length or CRC raises CorruptRecord (exit status 1).
"""
import json
import math
import struct
import sys


class CorruptRecord(Exception):
    pass


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf):
            raise CorruptRecord("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(buf):
    """Yield (field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        else:
            raise CorruptRecord("unknown wire type %d" % wire)
        if i > len(buf):
            raise CorruptRecord("field runs past the message")
        yield field, wire, value


def _int64(u):
    return u - (1 << 64) if u >= 1 << 63 else u


def parse_event(data):
    ev = {"wall_time": 0.0, "step": 0, "file_version": None, "values": []}
    for field, wire, value in _fields(data):
        if field == 1 and wire == 1:
            ev["wall_time"] = struct.unpack("<d", value)[0]
        elif field == 2 and wire == 0:
            ev["step"] = _int64(value)
        elif field == 3 and wire == 2:
            ev["file_version"] = value.decode("utf-8")
        elif field == 5 and wire == 2:
            for sf, sw, sv in _fields(value):
                if sf != 1 or sw != 2:
                    continue
                tag, simple = None, None
                for vf, vw, vv in _fields(sv):
                    if vf == 1 and vw == 2:
                        tag = vv.decode("utf-8")
                    elif vf == 2 and vw == 5:
                        simple = struct.unpack("<f", vv)[0]
                ev["values"].append((tag, simple))
    return ev


def read_records(raw):
    """The data of every record in raw (bytes), checking both CRCs."""
    i = 0
    while i < len(raw):
        if len(raw) - i < 12:
            raise CorruptRecord("truncated header at offset %d" % i)
        header = raw[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", raw[i + 8:i + 12])
        if hcrc != masked_crc(header):
            raise CorruptRecord("length CRC mismatch at offset %d" % i)
        i += 12
        if len(raw) - i < length + 4:
            raise CorruptRecord("truncated record at offset %d" % i)
        data = raw[i:i + length]
        (dcrc,) = struct.unpack("<I", raw[i + length:i + length + 4])
        if dcrc != masked_crc(data):
            raise CorruptRecord("data CRC mismatch at offset %d" % i)
        i += length + 4
        yield data


def read_file(path):
    with open(path, "rb") as f:
        raw = f.read()
    out = {"file_version": None, "points": []}
    for data in read_records(raw):
        ev = parse_event(data)
        if ev["file_version"] is not None and out["file_version"] is None:
            out["file_version"] = ev["file_version"]
        for tag, value in ev["values"]:
            out["points"].append({"wall_time": ev["wall_time"], "step": ev["step"],
                                  "tag": tag, "value": value})
    return out


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: tfevents_reader.py FILE\n")
        return 2
    try:
        out = read_file(argv[1])
    except CorruptRecord as e:
        sys.stderr.write("tfevents_reader: %s: %s\n" % (argv[1], e))
        return 1
    out["points"] = [{k: _jsonable(v) for k, v in p.items()} for p in out["points"]]
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
