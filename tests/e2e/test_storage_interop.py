"""Other S3 clients agree with trainctl, on s3rver and on radosgw: rclone and
boto3 read byte for byte what trainctl wrote, trainctl reads what they
wrote, multipart objects included (rclone in 5 MiB parts, boto3 in 8 MiB,
trainctl in 5 MiB here), and a bucket-to-bucket sync of their multipart
objects, run twice, copies nothing the second time."""
import os
import shutil
import subprocess

import pytest

from s3_fixture import REGION, both_servers, s3  # noqa: F401  (the fixture)
from storage_helpers import counts, run, tc, tree  # noqa: F401  (tc is a fixture)

MiB = 1 << 20
BIG = 20 * MiB + 12345  # several parts for every client, and a short last one


def files_with_a_big_one(root):
    """A few small files in folders, and one of ~20 MiB; {relative path: bytes}."""
    files = {"a.txt": b"alpha\n", "sub dir/ünï.bin": os.urandom(3000), "empty": b"",
             "big/model.bin": os.urandom(BIG)}
    for k, v in files.items():
        (root / k).parent.mkdir(parents=True, exist_ok=True)
        (root / k).write_bytes(v)
    return files


def rclone_env(s3, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # AWS_CA_BUNDLE upsets rclone
    env.update(RCLONE_CONFIG_SRV_TYPE="s3", RCLONE_CONFIG_SRV_PROVIDER="Other",
               RCLONE_CONFIG_SRV_ACCESS_KEY_ID=s3.access, RCLONE_CONFIG_SRV_SECRET_ACCESS_KEY=s3.secret,
               RCLONE_CONFIG_SRV_ENDPOINT=s3.endpoint, RCLONE_CONFIG_SRV_REGION=REGION,
               RCLONE_CONFIG_SRV_FORCE_PATH_STYLE="true", RCLONE_CONFIG=str(tmp_path / "rclone.conf"))
    return env


@pytest.fixture
def rclone():
    exe = shutil.which("rclone")
    if not exe:
        pytest.skip("rclone is not installed (scripts/install-deps.sh installs it)")
    return exe


@pytest.fixture
def boto3_client(s3):
    boto3 = pytest.importorskip("boto3", reason="python3-boto3 is not installed "
                                "(scripts/install-deps.sh installs it)")
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id=s3.access,
                        aws_secret_access_key=s3.secret, region_name=REGION,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def boto3_upload(client, root, bucket, prefix):
    """Upload the tree under root, objects of 8 MiB and more in 8 MiB parts."""
    from boto3.s3.transfer import TransferConfig
    cfg = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB, use_threads=False)
    for p in sorted(root.rglob("*")):
        if p.is_file():
            client.upload_file(str(p), bucket, prefix + str(p.relative_to(root)), Config=cfg)


def assert_parts(s3, client, bucket, key, n):
    """The object went up in n parts: its ETag says so (radosgw's does;
    s3rver's is the MD5 of the whole object)."""
    etag = client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
    if s3.name == "rgw":
        assert etag.endswith(f"-{n}"), (key, etag)


@both_servers
def test_rclone_and_boto3_read_ours_and_we_read_theirs(tc, s3, rclone, boto3_client, tmp_path):
    b = s3.bucket()
    renv = rclone_env(s3, tmp_path)
    # trainctl writes (5 MiB parts) ...
    ours = tmp_path / "ours"
    files = files_with_a_big_one(ours)
    run(tc, "sync", str(ours), f"s3://{b}/ours/", env=s3.env())
    assert_parts(s3, boto3_client, b, "ours/big/model.bin", 5)
    # ... rclone reads (--fast-list: s3rver drops some common prefixes in delimiter listings)
    subprocess.run([rclone, "copy", "--fast-list", f"srv:{b}/ours", str(tmp_path / "by-rclone")],
                   env=renv, check=True, timeout=300)
    assert tree(tmp_path / "by-rclone") == files
    # ... boto3 reads
    for k, v in files.items():
        assert boto3_client.get_object(Bucket=b, Key=f"ours/{k}")["Body"].read() == v, k
    # rclone writes (5 MiB parts), trainctl reads
    subprocess.run([rclone, "copy", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M", str(ours),
                    f"srv:{b}/rclone/"], env=renv, check=True, timeout=300)
    assert_parts(s3, boto3_client, b, "rclone/big/model.bin", 5)
    run(tc, "sync", f"s3://{b}/rclone/", str(tmp_path / "from-rclone"), env=s3.env())
    assert tree(tmp_path / "from-rclone") == files
    # boto3 writes (8 MiB parts), trainctl reads
    boto3_upload(boto3_client, ours, b, "boto3/")
    assert_parts(s3, boto3_client, b, "boto3/big/model.bin", 3)
    run(tc, "sync", f"s3://{b}/boto3/", str(tmp_path / "from-boto3"), env=s3.env())
    assert tree(tmp_path / "from-boto3") == files


@both_servers
def test_bucket_to_bucket_sync_of_their_multipart_objects_copies_nothing_twice(
        tc, s3, rclone, boto3_client, tmp_path):
    """Another client's multipart ETag ("md5-of-md5s-N", N of its parts) is no
    MD5 of the bytes, and trainctl's copy has its own: the second sync must
    still see the copies as equal to their sources."""
    b = s3.bucket()
    src = tmp_path / "src"
    files = files_with_a_big_one(src)
    subprocess.run([rclone, "copy", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M", str(src),
                    f"srv:{b}/from/rclone/"], env=rclone_env(s3, tmp_path), check=True, timeout=300)
    boto3_upload(boto3_client, src, b, "from/boto3/")
    # trainctl's own part sizes (its defaults): no ETag of theirs can match by luck
    env = dict(s3.env(), TRAINCTL_MULTIPART_THRESHOLD=str(64 * MiB), TRAINCTL_PART_SIZE=str(16 * MiB))
    p = run(tc, "sync", f"s3://{b}/from/", f"s3://{b}/to/", env=env)
    assert counts(p.stdout)["copied"] == 2 * len(files)
    for who in ("rclone", "boto3"):
        for k, v in files.items():
            assert s3.get(b, f"to/{who}/{k}") == v, (who, k)
    p = run(tc, "sync", f"s3://{b}/from/", f"s3://{b}/to/", env=env)
    assert counts(p.stdout) == {"copied": 0, "skipped": 2 * len(files), "deleted": 0}, p.stdout


@both_servers
def test_a_header_signed_and_not_sent(s3):
    """What the signature-checking proxy refuses, radosgw refuses too (403),
    while s3rver lets it through: the proxy keeps the s3rver runs honest."""
    import urllib.error
    b = s3.bucket()
    s3.put(b, "k", b"v")
    assert s3.request("GET", b, "k") == b"v"  # the helper's own signing is good
    for port in (s3.server_port, s3.port):
        try:
            got = s3.request("GET", b, "k", port=port, unsent={"expect": ""})
        except urllib.error.HTTPError as e:
            got = (e.code, e.read())
        if port == s3.port:  # through the proxy
            assert got[0] == 400 and b"SignedHeaderNotSent" in got[1], got
        elif s3.name == "rgw":
            assert got[0] == 403 and b"SignatureDoesNotMatch" in got[1], got
        else:
            assert got == b"v"
    assert s3.proxy.take_violations() == [f"GET /{b}/k: signed, not sent: expect"]
