"""test_tfevents_reader.py -- trainctl's TensorBoard writer against an
independent reader (tfevents_reader.py, written from the format alone).

The event file comes from the unit-test binary: `test_tfevents
write_for_reader` writes fixed points into $TC_TFEVENTS_OUT.  The binary is
found in $TC_BUILD_DIR, else the newest build*/test_tfevents of the repo.
Runs under pytest, or alone: python3 tests/e2e/test_tfevents_reader.py
"""
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
READER = os.path.join(HERE, "tfevents_reader.py")
sys.path.insert(0, HERE)
import tfevents_reader  # noqa: E402

# Keep in step with TEST(write_for_reader) in tests/unit/test_tfevents.c.
EXPECTED = [
    ("train/loss", 0, 2.5, 1700000000.5),
    ("train/loss", 1, 2.25, 1700000001.0),
    ("train.ips", 1, 512.0, 1700000001.0),
    ("train/loss", -3, float("nan"), 1700000002.0),
    ("inf", 2, float("inf"), 1700000003.0),
    ("big", 1 << 40, 0.001, 1700000004.0),
    ("\u00fcn\u00ef/tag", 5, -1.5, 1700000005.0),
]


def _binary():
    cands = []
    if os.environ.get("TC_BUILD_DIR"):
        cands.append(os.path.join(os.environ["TC_BUILD_DIR"], "test_tfevents"))
    cands += sorted(glob.glob(os.path.join(ROOT, "build*", "test_tfevents")),
                    key=os.path.getmtime, reverse=True)
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    raise RuntimeError("test_tfevents not built: cmake --build BUILD --target "
                       "test_tfevents, or set TC_BUILD_DIR")


def _write(outdir):
    env = dict(os.environ, TC_TFEVENTS_OUT=outdir)
    subprocess.run([_binary(), "write_for_reader"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    files = glob.glob(os.path.join(outdir, "events.out.tfevents.*"))
    assert len(files) == 1, files
    name = os.path.basename(files[0])
    assert name.startswith("events.out.tfevents.1700000000."), name
    return files[0]


def _float32(x):
    import struct
    return struct.unpack("<f", struct.pack("<f", x))[0]


def test_reader_reads_writer_output():
    with tempfile.TemporaryDirectory() as d:
        path = _write(d)
        res = subprocess.run([sys.executable, READER, path], check=True,
                             capture_output=True, text=True)
        out = json.loads(res.stdout)
    assert out["file_version"] == "brain.Event:2"
    pts = out["points"]
    assert len(pts) == len(EXPECTED)
    for p, (tag, step, value, wall) in zip(pts, EXPECTED):
        assert p["tag"] == tag
        assert p["step"] == step
        assert p["wall_time"] == wall
        if math.isnan(value):
            assert p["value"] == "NaN"
        elif math.isinf(value):
            assert p["value"] == ("Infinity" if value > 0 else "-Infinity")
        else:
            assert p["value"] == _float32(value)


def test_flipped_byte_is_detected():
    with tempfile.TemporaryDirectory() as d:
        path = _write(d)
        with open(path, "rb") as f:
            raw = bytearray(f.read())
        records = list(tfevents_reader.read_records(bytes(raw)))
        assert len(records) == len(EXPECTED) + 1
        # flip one bit in every region in turn: length, its CRC, data, data CRC
        first_len = 12 + len(records[0]) + 4
        for off in (0, 9, 12 + 3, first_len - 1, first_len + 20, len(raw) - 1):
            bad = bytearray(raw)
            bad[off] ^= 0x01
            try:
                list(tfevents_reader.read_records(bytes(bad)))
            except tfevents_reader.CorruptRecord:
                pass
            else:
                raise AssertionError("flipped byte at %d not detected" % off)
        bad = bytearray(raw)
        bad[first_len + 20] ^= 0x40
        badpath = path + ".bad"
        with open(badpath, "wb") as f:
            f.write(bad)
        res = subprocess.run([sys.executable, READER, badpath],
                             capture_output=True, text=True)
        assert res.returncode == 1
        assert "CRC mismatch" in res.stderr
        # a cut file is reported, not misread
        with open(badpath, "wb") as f:
            f.write(raw[:-3])
        res = subprocess.run([sys.executable, READER, badpath],
                             capture_output=True, text=True)
        assert res.returncode == 1


def test_crc32c_known_vector():
    assert tfevents_reader.crc32c(b"123456789") == 0xE3069283
    assert tfevents_reader.crc32c(b"") == 0


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            print("ok", name)
