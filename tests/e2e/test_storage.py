"""trainctl sync against real S3 servers on loopback (s3rver, and Ceph's radosgw
under @both_servers), a fault-injecting proxy in front of them, and local
folders. Other clients (rclone, boto3) are in test_storage_interop.py."""
import filecmp
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import wait_until
from faulty_proxy import FaultyProxy
from s3_fixture import both_servers, rgw_only, s3  # noqa: F401  (the fixture)
from storage_helpers import MULTIPART, ROOT, counts, run, tc, tree  # noqa: F401  (tc: the fixture)


def make_tree(root: Path, big=True):
    """Nested folders, unicode and spaces, an empty file, one multipart-sized file."""
    files = {
        "a.txt": b"alpha\n",
        "empty": b"",
        "sub dir/with space.txt": b"spaces " * 100,
        "sub dir/ünïcødé/名前.bin": os.urandom(3000),
        "deep/a/b/c/d.json": b'{"x": 1}',
        "a-b/z": b"sorts before a/ in byte order",
    }
    if big:
        files["big/model.bin"] = os.urandom(MULTIPART + 5 * 1024 * 1024 + 123)
    for k, v in files.items():
        p = root / k
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(v)
    return files


@both_servers
def test_sync_up_down_and_skip(tc, s3, tmp_path):
    src = tmp_path / "src"
    files = make_tree(src)
    b = s3.bucket()
    env = s3.env()
    p = run(tc, "sync", "--jobs", "4", str(src), f"s3://{b}/runs/one/", env=env)
    assert counts(p.stdout)["copied"] == len(files)
    keys = s3.keys(b, "runs/one/")
    assert keys == {f"runs/one/{k}": len(v) for k, v in files.items()}
    for k, v in files.items():
        assert s3.get(b, f"runs/one/{k}") == v, k
    # unchanged: nothing copied the second time
    p = run(tc, "sync", str(src), f"s3://{b}/runs/one", env=env)
    assert counts(p.stdout) == {"copied": 0, "skipped": len(files), "deleted": 0}
    # and down again, byte for byte
    dst = tmp_path / "dst"
    p = run(tc, "sync", f"s3://{b}/runs/one/", str(dst), env=env)
    assert counts(p.stdout)["copied"] == len(files)
    assert tree(dst) == files
    assert not [p for p in dst.rglob(".tc-part-*")]
    p = run(tc, "sync", f"s3://{b}/runs/one/", str(dst), env=env)
    assert counts(p.stdout)["copied"] == 0
    # a changed file goes up again, only it
    (src / "a.txt").write_bytes(b"alpha changed, longer\n")
    p = run(tc, "sync", str(src), f"s3://{b}/runs/one/", env=env)
    assert counts(p.stdout)["copied"] == 1
    assert s3.get(b, "runs/one/a.txt") == b"alpha changed, longer\n"


@both_servers
def test_sync_delete_and_dry_run(tc, s3, tmp_path):
    src = tmp_path / "src"
    files = make_tree(src, big=False)
    b = s3.bucket()
    env = s3.env()
    run(tc, "sync", str(src), f"s3://{b}/d/", env=env)
    (src / "a.txt").unlink()
    shutil.rmtree(src / "deep")
    p = run(tc, "sync", "--delete", "--dry-run", str(src), f"s3://{b}/d/", env=env)
    assert "would delete a.txt" in p.stdout and "would delete deep/a/b/c/d.json" in p.stdout
    assert len(s3.keys(b, "d/")) == len(files)  # nothing changed
    p = run(tc, "sync", "--delete", str(src), f"s3://{b}/d/", env=env)
    assert counts(p.stdout)["deleted"] == 2
    assert set(s3.keys(b, "d/")) == {f"d/{k}" for k in files if k not in ("a.txt", "deep/a/b/c/d.json")}
    # mirror down with --delete removes local extras
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "stale.txt").write_text("old")
    run(tc, "sync", "--delete", f"s3://{b}/d/", str(dst), env=env)
    assert tree(dst) == tree(src)


# names whose bytes Signature V4 encodes in the canonical request: a server
# that checks strictly refuses any one encoded differently from what it sent
ODD = ["odd/plus+sign.txt", "odd/per%cent 100%.txt", "odd/tilde~x", "odd/eq=amp&semi;",
       "odd/quote'paren(1)*!.txt", "odd/comma,colon:at@dollar$", "odd/hash#quest?",
       "odd/brackets[0]{1}", "odd/ümlaut é 名前", "odd/dots..and-dashes_", "odd/tab\tand^caret`"]


@both_servers
def test_odd_key_names_round_trip(tc, s3, tmp_path):
    src = tmp_path / "src"
    files = {k: k.encode() * 3 for k in ODD}
    for k, v in files.items():
        (src / k).parent.mkdir(parents=True, exist_ok=True)
        (src / k).write_bytes(v)
    b = s3.bucket()
    env = s3.env()
    p = run(tc, "sync", "--jobs", "4", str(src), f"s3://{b}/", env=env)
    assert counts(p.stdout)["copied"] == len(files)
    assert s3.keys(b) == {k: len(v) for k, v in files.items()}
    for k, v in files.items():
        assert s3.get(b, k) == v, k
    p = run(tc, "sync", f"s3://{b}/odd/", str(tmp_path / "dst"), env=env)
    assert tree(tmp_path / "dst") == {k[len("odd/"):]: v for k, v in files.items()}
    # deleted by name, too
    (src / ODD[0]).unlink()
    p = run(tc, "sync", "--delete", str(src), f"s3://{b}/", env=env)
    assert counts(p.stdout) == {"copied": 0, "skipped": len(files) - 1, "deleted": 1}
    assert ODD[0] not in s3.keys(b)


@rgw_only
def test_listing_past_one_page(tc, s3, tmp_path):
    """A listing answers 1,000 keys a page: every later page counts too
    (on radosgw: s3rver fails every page but the last)."""
    src = tmp_path / "src"
    n = 1005
    for i in range(n):
        p = src / f"p{i % 3}" / f"k{i:04d}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"%d" % i)
    b = s3.bucket()
    env = s3.env()
    p = run(tc, "sync", "--jobs", "8", str(src), f"s3://{b}/many/", env=env, timeout=300)
    assert counts(p.stdout)["copied"] == n
    assert len(s3.keys(b, "many/")) == n
    # the keys of the second page are seen: nothing copied again ...
    p = run(tc, "sync", str(src), f"s3://{b}/many/", env=env)
    assert counts(p.stdout) == {"copied": 0, "skipped": n, "deleted": 0}
    # ... all of them come down ...
    dst = tmp_path / "dst"
    p = run(tc, "sync", "--jobs", "8", f"s3://{b}/many/", str(dst), env=env, timeout=300)
    assert tree(dst) == tree(src)
    # ... and the last one, on the second page, is the one deleted
    (src / "p2" / f"k{n - 1:04d}").unlink()
    p = run(tc, "sync", "--delete", str(src), f"s3://{b}/many/", env=env)
    assert counts(p.stdout) == {"copied": 0, "skipped": n - 1, "deleted": 1}
    assert len(s3.keys(b, "many/")) == n - 1

def test_sync_local_to_local(tc, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = make_tree(src)
    p = run(tc, "sync", str(src), "file://" + str(dst))
    assert counts(p.stdout)["copied"] == len(files)
    assert tree(dst) == files
    # the copy gets the source's mtime: exactly, now that it travels as integer nanoseconds
    for k in files:
        assert os.stat(src / k).st_mtime_ns == os.stat(dst / k).st_mtime_ns, k
    p = run(tc, "sync", str(src), str(dst))
    assert counts(p.stdout)["copied"] == 0
    # one file as the source
    p = run(tc, "sync", str(src / "a.txt"), str(tmp_path / "single" / "renamed.txt"))
    assert (tmp_path / "single" / "renamed.txt").read_bytes() == files["a.txt"]
    p = run(tc, "sync", str(tmp_path / "missing"), str(dst), check=False)
    assert p.returncode == 2 and "does not exist" in p.stderr


@both_servers
def test_faulty_proxy_sync_is_byte_identical(tc, s3, tmp_path):
    src = tmp_path / "src"
    files = make_tree(src)
    for i in range(30):
        (src / "many" / f"f{i:03d}").parent.mkdir(parents=True, exist_ok=True)
        (src / "many" / f"f{i:03d}").write_bytes(os.urandom(1000 + i * 37))
    files = tree(src)
    b = s3.bucket()
    proxy = FaultyProxy(s3.port, every=4).start()
    try:
        env = s3.env(f"http://127.0.0.1:{proxy.port}")
        run(tc, "sync", "--jobs", "4", str(src), f"s3://{b}/f/", env=env)
        for k, v in files.items():
            assert s3.get(b, f"f/{k}") == v, k
        dst = tmp_path / "dst"
        run(tc, "sync", "--jobs", "4", f"s3://{b}/f/", str(dst), env=env)
        assert tree(dst) == files
        assert all(proxy.injected.values()), proxy.injected
    finally:
        proxy.stop()


@both_servers
def test_answer_cut_in_its_headers_is_retried(tc, s3, tmp_path):
    # libcurl reports success for an answer whose headers stop before
    # Content-Length; it was taken as an empty body ("got 0 of N bytes")
    # or an empty listing, whenever a cut happened to fall there
    src = tmp_path / "src"
    files = make_tree(src)
    b = s3.bucket()
    run(tc, "sync", "--jobs", "4", str(src), f"s3://{b}/h/", env=s3.env())
    proxy = FaultyProxy(s3.port, every=2, faults=("cuthead",)).start()
    try:
        env = s3.env(f"http://127.0.0.1:{proxy.port}")
        dst = tmp_path / "dst"
        p = run(tc, "sync", "--jobs", "1", f"s3://{b}/h/", str(dst), env=env)
        assert counts(p.stdout)["copied"] == len(files)
        assert tree(dst) == files
        assert proxy.injected["cuthead"] >= len(files), proxy.injected
    finally:
        proxy.stop()


@both_servers
@pytest.mark.parametrize("direction", ["up", "down"])
def test_sigkilled_sync_rerun_completes(tc, s3, tmp_path, direction):
    src = tmp_path / "src"
    for i in range(40):
        p = src / f"d{i % 4}" / f"file{i:02d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(200_000))
    (src / "big.bin").write_bytes(os.urandom(3 * MULTIPART))
    files = tree(src)
    b = s3.bucket()
    if direction == "down":
        run(tc, "sync", str(src), f"s3://{b}/k/", env=s3.env())
    proxy = FaultyProxy(s3.port, every=0).start()  # slow nothing, just a path to kill mid-way
    env = s3.env(f"http://127.0.0.1:{proxy.port}")
    env.update(TRAINCTL_MULTIPART_THRESHOLD=str(MULTIPART), TRAINCTL_PART_SIZE=str(5 << 20))
    dst = tmp_path / "dst"
    args = [str(src), f"s3://{b}/k/"] if direction == "up" else [f"s3://{b}/k/", str(dst)]
    proc = subprocess.Popen([tc, "sync", "--jobs", "2", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # mid-way: some of its ~50 requests went through, however slowly it started
    wait_until(lambda: proxy.count >= 8 or proc.poll() is not None, what="8 requests of the sync")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        run(tc, "sync", *args, env=env)
    finally:
        proxy.stop()
    if direction == "up":
        assert set(s3.keys(b, "k/")) == {f"k/{k}" for k in files}
        for k, v in files.items():
            assert s3.get(b, f"k/{k}") == v, k
    else:
        assert tree(dst) == files  # temporaries are hidden names, never the real ones


@both_servers
def test_credentials_never_printed(tc, s3, tmp_path):
    src = tmp_path / "src"
    make_tree(src, big=False)
    env = s3.env()
    env["AWS_SECRET_ACCESS_KEY"] = "sEcReT-do-not-print-123"
    env["AWS_ACCESS_KEY_ID"] = "NOSUCHKEY"
    p = run(tc, "sync", str(src), f"s3://{s3.bucket()}/x/", env=env, check=False)
    assert p.returncode == 3
    assert "InvalidAccessKeyId" in p.stderr
    assert "sEcReT" not in p.stderr + p.stdout
    env = s3.env()
    del env["AWS_SECRET_ACCESS_KEY"]
    env["TRAINCTL_STORAGE_CONFIG"] = str(tmp_path / "none.conf")
    p = run(tc, "sync", str(src), "s3://bucket/x/", env=env, check=False)
    assert p.returncode == 2 and "no credentials" in p.stderr


@both_servers
def test_config_file_and_obs_alias(tc, s3, tmp_path):
    src = tmp_path / "src"
    files = make_tree(src, big=False)
    b = s3.bucket()
    conf = tmp_path / "storage.conf"
    conf.write_text(f"[s3]\naccess_key_id = {s3.access}\nsecret_access_key = {s3.secret}\n"
                    f"[obs]\nendpoint = {s3.endpoint}\nregion = cn-north-4\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OBS_"))}
    env["TRAINCTL_STORAGE_CONFIG"] = str(conf)
    run(tc, "sync", str(src), f"obs://{b}/o/", env=env)
    assert set(s3.keys(b, "o/")) == {f"o/{k}" for k in files}


@both_servers
def test_docs_storage_example_runs(tc, s3, tmp_path):
    """The `# example:` spec of docs/storage.md runs."""
    import re
    text = (ROOT / "docs" / "storage.md").read_text()
    m = re.search(r"```yaml\n# example: (\S+)\n(.*?)```", text, re.S)
    assert m, "docs/storage.md lost its example"
    s3.make_bucket("demo")  # or made by an earlier run of this test in the session
    s3.put("demo", "datasets/digits/a.csv", b"1,2,3\n")
    s3.put("demo", "datasets/digits/b.csv", b"4,5\n")
    spec = tmp_path / f"{m.group(1)}.yaml"
    spec.write_text(m.group(2))
    env = s3.env()
    env["TRAINCTL_HOME"] = str(tmp_path / "home")
    p = run(tc, "run", str(spec), env=env)
    job = next((tmp_path / "home" / "runs").iterdir()).name
    sizes = s3.get("demo", f"runs/{job}/sizes.txt").decode()
    assert "a.csv" in sizes and "b.csv" in sizes, (sizes, p.stderr)
