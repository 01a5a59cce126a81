"""trainctl sync against a real S3 server (s3rver on loopback), a fault-injecting
proxy in front of it, local folders, and rclone as a second real client."""
import filecmp
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import wait_until
from faulty_proxy import FaultyProxy
from s3_fixture import ACCESS, SECRET, s3  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]
MULTIPART = 6 * 1024 * 1024  # threshold used in tests; parts are 5 MiB


@pytest.fixture(scope="session")
def tc():
    exe = os.environ.get("TRAINCTL") or str(ROOT / "build" / "trainctl")
    if not os.path.exists(exe):
        pytest.skip(f"no trainctl binary at {exe} (set TRAINCTL)")
    return exe


def run(tc, *args, env=None, check=True, timeout=120):
    e = dict(env or os.environ)
    e.setdefault("TRAINCTL_MULTIPART_THRESHOLD", str(MULTIPART))
    e.setdefault("TRAINCTL_PART_SIZE", str(5 * 1024 * 1024))
    p = subprocess.run([tc, *args], env=e, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"trainctl {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


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


def tree(root: Path):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def counts(out):
    # "N copied, N skipped, N deleted, ..."
    last = [l for l in out.splitlines() if "copied," in l][-1]
    parts = dict((w, int(n)) for n, w in (x.strip().split(" ")[:2] for x in last.split(",")[:3]))
    return parts


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


def test_config_file_and_obs_alias(tc, s3, tmp_path):
    src = tmp_path / "src"
    files = make_tree(src, big=False)
    b = s3.bucket()
    conf = tmp_path / "storage.conf"
    conf.write_text(f"[s3]\naccess_key_id = {ACCESS}\nsecret_access_key = {SECRET}\n"
                    f"[obs]\nendpoint = {s3.endpoint}\nregion = cn-north-4\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OBS_"))}
    env["TRAINCTL_STORAGE_CONFIG"] = str(conf)
    run(tc, "sync", str(src), f"obs://{b}/o/", env=env)
    assert set(s3.keys(b, "o/")) == {f"o/{k}" for k in files}


def test_rclone_reads_ours_and_we_read_rclones(tc, s3, tmp_path):
    rclone = shutil.which("rclone")
    if not rclone:
        pytest.skip("rclone is not installed (scripts/install-deps.sh installs it)")
    src = tmp_path / "src"
    files = make_tree(src)
    b = s3.bucket()
    run(tc, "sync", str(src), f"s3://{b}/ours/", env=s3.env())
    renv = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # AWS_CA_BUNDLE upsets rclone
    renv.update(RCLONE_CONFIG_S3RV_TYPE="s3", RCLONE_CONFIG_S3RV_PROVIDER="Other",
                RCLONE_CONFIG_S3RV_ACCESS_KEY_ID=ACCESS, RCLONE_CONFIG_S3RV_SECRET_ACCESS_KEY=SECRET,
                RCLONE_CONFIG_S3RV_ENDPOINT=s3.endpoint, RCLONE_CONFIG_S3RV_FORCE_PATH_STYLE="true",
                RCLONE_CONFIG=str(tmp_path / "rclone.conf"))
    out = subprocess.run([rclone, "lsf", "-R", "--files-only", f"s3rv:{b}/ours"], env=renv,
                         capture_output=True, text=True, check=True).stdout
    assert sorted(out.split("\n")[:-1]) == sorted(files)
    down = tmp_path / "rclone-down"
    # --fast-list: s3rver drops some common prefixes in delimiter listings (deep/ here)
    subprocess.run([rclone, "copy", "--fast-list", f"s3rv:{b}/ours", str(down)], env=renv, check=True)
    assert tree(down) == files
    # rclone uploads, trainctl downloads
    theirs = tmp_path / "theirs"
    tfiles = make_tree(theirs)
    subprocess.run([rclone, "copy", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M", str(theirs),
                    f"s3rv:{b}/theirs"], env=renv, check=True)
    dst = tmp_path / "dst"
    run(tc, "sync", f"s3://{b}/theirs/", str(dst), env=s3.env())
    assert tree(dst) == tfiles


def test_docs_storage_example_runs(tc, s3, tmp_path):
    """The `# example:` spec of docs/storage.md runs against s3rver."""
    import re
    import urllib.error
    import urllib.request
    text = (ROOT / "docs" / "storage.md").read_text()
    m = re.search(r"```yaml\n# example: (\S+)\n(.*?)```", text, re.S)
    assert m, "docs/storage.md lost its example"
    try:
        urllib.request.urlopen(urllib.request.Request(f"{s3.endpoint}/demo", method="PUT"), timeout=10)
    except urllib.error.HTTPError:
        pass  # made by an earlier run of this test in the session
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
