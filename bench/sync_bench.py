#!/usr/bin/python3
"""trainctl sync against rclone on the same data and the same S3 server.

The server is s3rver (node, its objects in files) or, with --server rgw,
Ceph's radosgw (tests/e2e/rgw_fixture.py: one monitor, one OSD keeping
objects in RAM, radosgw; it needs RAM for every upload of the run).
Data sets: many small files (default 1,000 x 1 MiB = 1 GiB) and one big
file (default 2 GiB). Directions: local -> server, server -> local, and
local -> local. Both tools get the same parallelism (8 transfers, 16 MiB
parts, 8 parts in flight for one big object). Each upload goes to a fresh
bucket and each download or local copy to a fresh folder; downloads all
read the same bucket (filled once by trainctl); the data is in the page
cache for every tool.

    bench/sync_bench.py [--small-files 1000] [--small-size 1048576] [--big-size 2147483648]
                        [--trainctl build/trainctl] [--baseline OLD/trainctl]
                        [--only small|big] [--reps 1] [--cases up,down,local] [--each]
                        [--server s3rver|rgw]

With --reps N every case runs N times per tool, the tools in rotating
order, and medians are printed; --baseline adds another trainctl binary to
the rotation (before and after a change, side by side).  Prints one line
per case: seconds for each tool and rclone/trainctl (> 1: trainctl is
faster), each tool's own CPU time (user + system) and the server's CPU time
(radosgw's: its three daemons) during that tool's runs.

Before every timed run the run's source is read once more into the page
cache: rclone's local backend drops what it reads from the cache
(POSIX_FADV_DONTNEED), so without this whichever tool ran next after
rclone read its source from the disk (the 512 MiB local copy took 1.3 s
instead of 0.4 s for the tool that followed rclone).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from s3_fixture import S3  # noqa: E402  (after the path)


def start_s3rver(tmp):
    import socket
    node = shutil.which("node")
    js = ROOT / "tests" / "s3" / "node_modules" / "s3rver" / "bin" / "s3rver.js"
    if not js.exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT / "tests" / "s3", check=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([node, str(js), "-d", str(tmp / "s3data"), "-a", "127.0.0.1", "-p", str(port), "--silent"])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()

            def stop():
                p.terminate()
                p.wait()
            return S3("s3rver", port, "S3RVER", "S3RVER", check=False), [p.pid], stop
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("s3rver did not start")


def start_rgw(tmp, memstore_bytes):
    from rgw_fixture import Rgw
    cluster = Rgw(tmp / "rgw", memstore_bytes)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return S3("rgw", cluster.port, cluster.access, cluster.secret, check=False), cluster.pids(), cluster.stop


CPU = {}  # tool -> CPU seconds (user + system) of each run, from wait4
SERVER_CPU = {}  # tool -> the server's CPU seconds during each run, from /proc
SERVER_PIDS = []


def proc_cpu(pids):
    """User + system seconds of processes so far (all their threads)."""
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def warm(path):
    """Read every file under path, so that the run finds it in the page cache."""
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(8 << 20):
                    pass


def timed(cmd, env, tool=None):
    s0 = proc_cpu(SERVER_PIDS)
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), cmd)
    dt = time.perf_counter() - t
    if tool:
        CPU.setdefault(tool, []).append(ru.ru_utime + ru.ru_stime)
        SERVER_CPU.setdefault(tool, []).append(proc_cpu(SERVER_PIDS) - s0)
    return dt


def make_data(root, nfiles, size, big):
    small = root / "small"
    for i in range(nfiles):
        p = small / f"d{i % 10}" / f"f{i:05d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(size))
    bigd = root / "big"
    bigd.mkdir(parents=True, exist_ok=True)
    with open(bigd / "model.bin", "wb") as f:
        chunk = os.urandom(64 << 20)
        left = big
        while left:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
    return {"small": small, "big": bigd}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small-files", type=int, default=1000)
    ap.add_argument("--small-size", type=int, default=1 << 20)
    ap.add_argument("--big-size", type=int, default=2 << 30)
    ap.add_argument("--trainctl", default=str(ROOT / "build" / "trainctl"))
    ap.add_argument("--only", choices=["small", "big"])
    ap.add_argument("--baseline", help="another trainctl binary, measured side by side")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--cases", default="up,down,local", help="which directions (default: all three)")
    ap.add_argument("--dir", default=None, help="scratch folder (default: a temp folder under /tmp)")
    ap.add_argument("--each", action="store_true", help="print every run (round, tool, seconds, CPU)")
    ap.add_argument("--server", choices=["s3rver", "rgw"],
                    default=os.environ.get("SYNC_BENCH_SERVER", "s3rver"),
                    help="the S3 server (default s3rver, or $SYNC_BENCH_SERVER)")
    ap.add_argument("--rgw-memory", type=int, default=8 << 30,
                    help="bytes the radosgw cluster may keep in RAM (default 8 GiB)")
    a = ap.parse_args()
    rclone = shutil.which("rclone")
    if not rclone:
        sys.exit("rclone is not installed (apt install rclone)")
    tmp = Path(tempfile.mkdtemp(prefix="tc-syncbench-", dir=a.dir))
    global SERVER_PIDS
    if a.server == "rgw":
        srv, SERVER_PIDS, stop_server = start_rgw(tmp, a.rgw_memory)
    else:
        srv, SERVER_PIDS, stop_server = start_s3rver(tmp)
    bucket = srv.bucket
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID=srv.access, AWS_SECRET_ACCESS_KEY=srv.secret,
                   AWS_ENDPOINT_URL=srv.endpoint, AWS_REGION="us-east-1",
                   TRAINCTL_PART_SIZE=str(16 << 20),
                   RCLONE_CONFIG=str(tmp / "rclone.conf"), RCLONE_CONFIG_S3_TYPE="s3",
                   RCLONE_CONFIG_S3_PROVIDER="Other", RCLONE_CONFIG_S3_ACCESS_KEY_ID=srv.access,
                   RCLONE_CONFIG_S3_SECRET_ACCESS_KEY=srv.secret,
                   RCLONE_CONFIG_S3_ENDPOINT=srv.endpoint, RCLONE_CONFIG_S3_REGION="us-east-1",
                   RCLONE_CONFIG_S3_FORCE_PATH_STYLE="true")
        data = make_data(tmp / "data", a.small_files, a.small_size, a.big_size)
        tcs = {"trainctl": a.trainctl}
        if a.baseline:
            tcs["baseline"] = a.baseline
        rc = [rclone, "copy", "--transfers", "8", "--checkers", "8", "--s3-chunk-size", "16M",
              "--s3-upload-concurrency", "8", "--multi-thread-streams", "8", "--fast-list"]

        def argv(tool, case, src, n):
            """The command of tool for case, round n (fresh destinations)."""
            dst = tmp / f"{tool}-{case}-{n}"
            if tool == "rclone":
                if case == "up":
                    return rc + [str(src), f"s3:{bucket()}/x"]
                if case == "down":
                    return rc + [f"s3:{down}/x", str(dst)]
                return rc + ["--multi-thread-streams", "0", str(src), str(dst)]
            tc = [tcs[tool], "sync", "-q", "--jobs", "8"]
            if case == "up":
                return tc + [str(src), f"s3://{bucket()}/x/"]
            if case == "down":
                return tc + [f"s3://{down}/x/", str(dst)]
            return tc + [str(src), str(dst)]

        tools = list(tcs) + ["rclone"]
        print(f"{'case':<22}" + "".join(f"{t + ' s':>12}" for t in tools) +
              "".join(f"{'rclone/' + t:>18}" for t in tcs), flush=True)
        for name in ("small", "big"):
            if a.only and a.only != name:
                continue
            src = data[name]
            total = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
            down = bucket()
            timed([a.trainctl, "sync", "-q", "--jobs", "8", str(src), f"s3://{down}/x/"], env)
            label = f"{a.small_files}x{a.small_size >> 10}KiB" if name == "small" else f"1x{a.big_size >> 20}MiB"
            for case in [c for c in ("up", "down", "local") if c in a.cases.split(",")]:
                times = {t: [] for t in tools}
                CPU.clear()
                SERVER_CPU.clear()
                loads = []
                # what the run reads: the local source, or the objects in s3rver's folder
                # (radosgw's are in RAM)
                hot = src if case != "down" else tmp / "s3data" / down if a.server == "s3rver" else None
                for n in range(a.reps):
                    for t in tools[n % len(tools):] + tools[:n % len(tools)]:
                        if hot:
                            warm(hot)
                        loads.append(os.getloadavg()[0])
                        times[t].append(timed(argv(t, case, src, n), env, t))
                        if a.each:
                            print(f"    {case} round {n} {t:<9} {times[t][-1]:6.2f} s, CPU {CPU[t][-1]:5.2f} s,"
                                  f" s3rver {SERVER_CPU[t][-1]:5.2f} s, load {loads[-1]:.1f}", flush=True)
                        shutil.rmtree(tmp / f"{t}-{case}-{n}", ignore_errors=True)
                med = {t: statistics.median(v) for t, v in times.items()}
                print(f"{label + ' ' + case:<22}" + "".join(f"{med[t]:>12.2f}" for t in tools) +
                      "".join(f"{med['rclone'] / med[t]:>18.2f}" for t in tcs) +
                      f"   ({total / med['trainctl'] / 1e6:.0f} vs {total / med['rclone'] / 1e6:.0f} MB/s;"
                      f" load {min(loads):.1f}-{max(loads):.1f})", flush=True)
                # the tools' own CPU (the server's is not counted): less tied to the load
                print(f"{'  CPU s, median':<22}" + "".join(f"{statistics.median(CPU[t]):>12.2f}" for t in tools),
                      flush=True)
                if case != "local":  # the server's CPU while each tool ran: the same requests, the same work?
                    print(f"{'  ' + a.server + ' CPU s, median':<22}" +
                          "".join(f"{statistics.median(SERVER_CPU[t]):>12.2f}" for t in tools), flush=True)
                if a.reps > 1:  # on a loaded machine the best of N says more than the median
                    best = {t: min(v) for t, v in times.items()}
                    print(f"{'  best of ' + str(a.reps):<22}" + "".join(f"{best[t]:>12.2f}" for t in tools) +
                          "".join(f"{best['rclone'] / best[t]:>18.2f}" for t in tcs), flush=True)
                    # runs of one round are next to each other in time: their ratio shares the load
                    rounds = {t: statistics.median(r / x for r, x in zip(times["rclone"], times[t]))
                              for t in tcs}
                    print(f"{'  ratio per round, med':<22}" + " " * 12 * len(tools) +
                          "".join(f"{rounds[t]:>18.2f}" for t in tcs), flush=True)
                    print(f"{'  spread (min-max)':<22}" +
                          "".join(f"{min(v):>6.2f}-{max(v):<5.2f}" for v in times.values()), flush=True)
    finally:
        stop_server()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
