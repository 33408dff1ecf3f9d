#!/usr/bin/env python3
"""Checks TensorBoard event files against the format, needing nothing installed:
TFRecord framing (uint64 length, masked CRC-32C of the length, data, masked CRC-32C of
the data), Event protobufs decoded by a minimal wire-format reader, the first event
the file_version "brain.Event:2". CRC-32C here is computed from its definition
(reflected Castagnoli polynomial), independently of ftmpi's code.

usage: tfevents_check.py FILE  -> prints "step tag value" per scalar"""
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(blob):
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            sys.exit("truncated record header at byte %d" % pos)
        (n,) = struct.unpack_from("<Q", blob, pos)
        (lcrc,) = struct.unpack_from("<I", blob, pos + 8)
        if lcrc != masked(crc32c(blob[pos:pos + 8])):
            sys.exit("bad length CRC at byte %d" % pos)
        data = blob[pos + 12:pos + 12 + n]
        (dcrc,) = struct.unpack_from("<I", blob, pos + 12 + n)
        if len(data) != n or dcrc != masked(crc32c(data)):
            sys.exit("bad data CRC at byte %d" % pos)
        pos += 12 + n + 4
        yield data


def varint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def fields(buf):
    """(field number, wire type, value) of a message: ints, bytes or raw fixed bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = varint(buf, pos)
        elif wire == 1:
            v, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            v, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            v, pos = buf[pos:pos + 4], pos + 4
        else:
            sys.exit("unexpected wire type %d" % wire)
        yield num, wire, v


def main(path):
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C
    blob = open(path, "rb").read()
    first = True
    for data in records(blob):
        ev = {num: (wire, v) for num, wire, v in fields(data)}
        if ev.get(1, (None,))[0] != 1:
            sys.exit("event without a double wall_time")
        (wall,) = struct.unpack("<d", ev[1][1])
        if not 1.5e9 < wall < 4e9:
            sys.exit("implausible wall_time %r" % wall)
        if first:
            if ev.get(3) != (2, b"brain.Event:2"):
                sys.exit("first event is not file_version brain.Event:2")
            first = False
            continue
        step = ev[2][1] if 2 in ev else 0
        for num, wire, value in fields(ev[5][1]):
            if num != 1 or wire != 2:
                sys.exit("Summary field %d" % num)
            v = dict((n, x) for n, _, x in fields(value))
            print(step, v[1].decode(), repr(struct.unpack("<f", v[2])[0]))
    if first:
        sys.exit("empty event file")


if __name__ == "__main__":
    main(sys.argv[1])
