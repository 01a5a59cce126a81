"""tfevents_writer.py -- write TensorBoard event files without TensorFlow or
trainctl, from the format alone (docs/formats.md, "TensorBoard event
files"), the way torch.utils.tensorboard and tf.summary write them: an
independent writer to check trainctl's reader (src/metrics/tfread.c).

A training script run as a job imports it (its folder on sys.path):

    w = tfevents_writer.Writer(os.path.join(os.environ["TRAINCTL_TENSORBOARD_DIR"], "run"))
    w.scalar("train/loss", 0.5, step=10)                 # simple_value, as torch does
    w.scalar("train/acc", 0.75, step=10, style="double") # a scalar tensor, as tf.summary does
    w.flush()

The CRC32C and its mask are tfevents_reader's (the reader of the same
format, written from the same description).
"""
import os
import socket
import struct
import time

import tfevents_reader

masked_crc = tfevents_reader.masked_crc


def varint(v):
    v &= (1 << 64) - 1  # negative int64: ten bytes, as protobuf writes them
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def length_delimited(field, data):
    return key(field, 2) + varint(len(data)) + data


def double(field, d):
    return key(field, 1) + struct.pack("<d", d)


def float32(field, f):
    return key(field, 5) + struct.pack("<f", f)


def record(data):
    """One framed record: length, its masked CRC, the data, its masked CRC."""
    head = struct.pack("<Q", len(data))
    return (head + struct.pack("<I", masked_crc(head)) + data
            + struct.pack("<I", masked_crc(data)))


DT_FLOAT, DT_DOUBLE = 1, 2


def value(tag, v, style="simple"):
    """A Summary.Value: simple_value, or a scalar tensor with the scalars plugin."""
    out = length_delimited(1, tag.encode())
    if style == "simple":
        return out + float32(2, v)
    if style == "double":  # TensorProto {dtype, double_val packed}
        tensor = key(1, 0) + varint(DT_DOUBLE) + length_delimited(6, struct.pack("<d", v))
    else:  # "float": TensorProto {dtype, tensor_content}
        tensor = key(1, 0) + varint(DT_FLOAT) + length_delimited(4, struct.pack("<f", v))
    plugin = length_delimited(1, length_delimited(1, b"scalars"))
    return out + length_delimited(9, plugin) + length_delimited(8, tensor)


def event(wall_time, step=0, values=(), file_version=None):
    out = double(1, wall_time)
    if step:
        out += key(2, 0) + varint(step)
    if file_version:
        out += length_delimited(3, file_version.encode())
    if values:
        out += length_delimited(5, b"".join(length_delimited(1, v) for v in values))
    return out


class Writer:
    """An event file in folder (made if missing), named as TensorBoard's are."""

    def __init__(self, folder, wall_time=None):
        os.makedirs(folder, exist_ok=True)
        wall_time = time.time() if wall_time is None else wall_time
        self.path = os.path.join(folder, "events.out.tfevents.%d.%s.%d.0" % (
            int(wall_time), socket.gethostname(), os.getpid()))
        self.f = open(self.path, "ab")
        self.write(record(event(wall_time, file_version="brain.Event:2")))

    def write(self, raw):
        self.f.write(raw)

    def scalar(self, tag, v, step, wall_time=None, style="simple"):
        """One Event holding one scalar, as torch's add_scalar writes it."""
        wall_time = time.time() if wall_time is None else wall_time
        self.write(record(event(wall_time, step, [value(tag, v, style)])))

    def flush(self):
        self.f.flush()

    def close(self):
        self.f.close()
