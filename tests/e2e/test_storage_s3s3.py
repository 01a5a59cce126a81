"""S3 to S3 sync of multipart objects whose parts differ.

A multipart ETag depends on the part size, so two copies of one content
written with different part sizes have different ETags. sync decides from
metadata (docs/storage.md): a copy trainctl made records its source's ETag,
and an object whose MD5 trainctl knew gets x-amz-meta-md5chksum.
On both servers: s3rver's multipart ETag is the MD5 of the whole object,
so only radosgw's (an MD5 of the parts' MD5s, "-N") makes the case real.
"""
import os

from s3_fixture import both_servers, s3  # noqa: F401  (the fixture)
from storage_helpers import run, tc  # noqa: F401  (tc is a fixture)

MiB = 1024 * 1024


def _summary(p):
    return p.stdout.strip().splitlines()[-1]


@both_servers
def test_a_multipart_copy_is_known_whatever_its_parts(tc, s3, tmp_path):
    src, dst = s3.bucket(), s3.bucket()
    local = tmp_path / "local"
    local.mkdir()
    (local / "big.bin").write_bytes(os.urandom(13 * MiB))
    (local / "small.bin").write_bytes(b"small")
    env = s3.env()
    env["TRAINCTL_MULTIPART_THRESHOLD"] = str(6 * MiB)
    # written in 5 MiB parts: ETag "...-3"
    run(tc, "sync", str(local), f"s3://{src}/d/", env=env)
    # copied in 7 MiB parts: ETag "...-2"
    env7 = dict(env, TRAINCTL_PART_SIZE=str(7 * MiB))
    p = run(tc, "sync", f"s3://{src}/d/", f"s3://{dst}/d/", env=env7)
    assert _summary(p).startswith("2 copied, 0 skipped"), p.stdout
    p = run(tc, "sync", f"s3://{src}/d/", f"s3://{dst}/d/", env=env7)
    assert _summary(p).startswith("0 copied, 2 skipped"), p.stdout
    assert s3.get(dst, "d/big.bin") == (local / "big.bin").read_bytes()
    # a changed source of the same size is copied again
    (local / "big.bin").write_bytes(os.urandom(13 * MiB))
    run(tc, "sync", str(local), f"s3://{src}/d/", env=env)
    p = run(tc, "sync", f"s3://{src}/d/", f"s3://{dst}/d/", env=env7)
    assert _summary(p).startswith("1 copied, 1 skipped"), p.stdout
    assert s3.get(dst, "d/big.bin") == (local / "big.bin").read_bytes()


@both_servers
def test_a_plain_source_copied_in_parts_carries_its_md5(tc, s3, tmp_path):
    a, b, c = s3.bucket(), s3.bucket(), s3.bucket()
    data = os.urandom(11 * MiB)
    s3.put(a, "x.bin", data)  # one PUT: its ETag is its MD5
    env = s3.env()
    env["TRAINCTL_MULTIPART_THRESHOLD"] = str(6 * MiB)
    run(tc, "sync", f"s3://{a}/", f"s3://{b}/", env=env)  # b: multipart, md5chksum
    run(tc, "sync", f"s3://{a}/", f"s3://{c}/", env=dict(env, TRAINCTL_PART_SIZE=str(6 * MiB)))
    # b and c were both copied from a, in other parts: their MD5s say they agree
    p = run(tc, "sync", f"s3://{b}/", f"s3://{c}/", env=env)
    assert _summary(p).startswith("0 copied, 1 skipped"), p.stdout
