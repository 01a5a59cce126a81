"""test_metrics_tfevents.py -- metrics from the TensorBoard event files a job
writes (src/metrics/tfread.c, ingest.h note 6).

The jobs write event files through tfevents_writer.py, a writer made from
the format alone (no TensorFlow, no trainctl code), as torch's
SummaryWriter and tf.summary would: into $TRAINCTL_TENSORBOARD_DIR and into
a folder named in metrics.tensorboard_dirs.  They must give the same stored
points as the same values printed as DLLogger lines; trainctl's own event
files (a rank that prints DLLL lines) are not read back; corrupt and cut
records are counted, the job still succeeds and the other points are kept;
a file is followed while the job writes it, a half record at its end
waited on.
"""
import json
import re
from pathlib import Path

from conftest import REPO, wait_until

E2E = Path(__file__).resolve().parent

# Values exact in 32 bits: event files keep floats, DLLL lines doubles.
STEPS = (10, 20, 30)


def loss(rank, step):
    return 1.0 / (1 << (step // 10)) + rank


def acc(rank, step):
    return 0.125 * (step // 10) + rank / 4


WALL0 = 1700000000.5

PRELUDE = f"""
import json, os, sys, time
sys.path.insert(0, {str(E2E)!r})
import tfevents_writer
rank = int(os.environ["RANK"])
def loss(rank, step): return 1.0 / (1 << (step // 10)) + rank
def acc(rank, step): return 0.125 * (step // 10) + rank / 4
WALL0 = {WALL0!r}
"""

# rank 0: the job's TensorBoard folder, simple values (torch's way);
# rank 1: runs/ (metrics.tensorboard_dirs, as docs/metrics.md shows it), under rank1/, the accuracy as a
# double tensor (tf.summary's way); rank 2 prints DLLL lines, so trainctl
# writes event files of its own under the TensorBoard folder.
TFEVENTS_JOB = PRELUDE + """
if rank == 2:
    for step in (10, 20, 30):
        print("DLLL " + json.dumps({"timestamp": WALL0 + step, "type": "LOG", "step": step,
              "data": {"train.loss": loss(rank, step), "train.acc": acc(rank, step)}}), flush=True)
    sys.exit(0)
folder = (os.path.join(os.environ["TRAINCTL_TENSORBOARD_DIR"], "run") if rank == 0
          else os.path.join("runs", "rank%d" % rank))
w = tfevents_writer.Writer(folder)
for step in (10, 20, 30):
    w.scalar("train.loss", loss(rank, step), step, WALL0 + step)
    w.scalar("train.acc", acc(rank, step), step, WALL0 + step,
             style="simple" if rank == 0 else "double")
    w.flush()
w.close()
"""

DLLL_JOB = PRELUDE + """
for step in (10, 20, 30):
    print("DLLL " + json.dumps({"timestamp": WALL0 + step, "type": "LOG", "step": step,
          "data": {"train.loss": loss(rank, step), "train.acc": acc(rank, step)}}), flush=True)
"""


def _spec(tmp_path, name, script, nproc, extra=""):
    (tmp_path / f"{name}.py").write_text(script)
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"name: {name}\ncommand: [\"/usr/bin/python3\", \"{name}.py\"]\n"
                    f"workdir: {tmp_path}\ndevices: {{type: cpu, per_node: {nproc}}}\n{extra}")
    return spec


def _doc_yaml():
    """The spec lines docs/metrics.md gives for event files written elsewhere."""
    text = (REPO / "docs" / "metrics.md").read_text()
    at = text.index("## TensorBoard event files a job writes")
    block = text[text.index("```yaml\n", at) + 8:]
    return block[:block.index("```")]


def _job_id(text):
    m = re.search(r"job (\d{8}-\d{6}-\d{3}-[0-9a-f]{4})", text)
    assert m, text
    return m.group(1)


def _points(run_tc, job):
    r = run_tc("metrics", job, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _key(p):
    """Every field of a stored point: metric, rank, kind, seq, epoch, iter, step, value, wall_time."""
    return tuple(sorted(p.items()))


def test_event_files_give_the_points_of_dlll_lines(run_tc, tmp_path):
    tf = _spec(tmp_path, "tfev", TFEVENTS_JOB, 3, _doc_yaml())
    r = run_tc("run", tf)
    assert r.returncode == 0, r.stderr
    tf_job = _job_id(r.stderr)
    assert "0 malformed" in r.stderr, r.stderr
    dl = _spec(tmp_path, "dlll", DLLL_JOB, 3)
    r = run_tc("run", dl)
    assert r.returncode == 0, r.stderr
    dl_job = _job_id(r.stderr)

    got = sorted(map(_key, _points(run_tc, tf_job)), key=repr)
    want = sorted(map(_key, _points(run_tc, dl_job)), key=repr)
    assert len(want) == 3 * 3 * 2
    assert got == want
    assert dict(got[0])["wall_time"] in [WALL0 + s for s in STEPS]
    # the table as a user sees it
    assert run_tc("metrics", tf_job).stdout == run_tc("metrics", dl_job).stdout
    # trainctl's own files of rank 2 were not read back: one point per step and rank
    pts = _points(run_tc, tf_job)
    assert sorted((p["rank"], p["metric"], p["step"]) for p in pts) == sorted(
        (rank, m, str(s)) for rank in range(3) for m in ("train.loss", "train.acc") for s in STEPS)


def _own_files(home):
    return sorted(p for p in home.rglob("events.out.tfevents.*") if "/rank-" in str(p))


def test_trainctl_does_not_read_its_own_event_files(run_tc, home, tmp_path):
    spec = _spec(tmp_path, "own", DLLL_JOB, 2)
    r = run_tc("run", spec)
    assert r.returncode == 0, r.stderr
    job = _job_id(r.stderr)
    own = _own_files(home)
    assert len(own) == 2, own  # rank-0 and rank-1 under the job's TensorBoard folder
    assert len(_points(run_tc, job)) == 2 * 2 * 3


CORRUPT_JOB = PRELUDE + """
w = tfevents_writer.Writer(os.environ["TRAINCTL_TENSORBOARD_DIR"])
w.scalar("loss", 1.0, 1, WALL0 + 1)
bad = bytearray(tfevents_writer.record(tfevents_writer.event(
    WALL0 + 2, 2, [tfevents_writer.value("loss", 2.0)])))
bad[20] ^= 0x10                      # a flipped data byte: the data CRC fails
w.write(bytes(bad))
w.scalar("loss", 3.0, 3, WALL0 + 3)
w.write(b"garbage between records")  # a stretch that is no record: found again after it
w.scalar("loss", 4.0, 4, WALL0 + 4)
half = tfevents_writer.record(tfevents_writer.event(WALL0 + 5, 5, [tfevents_writer.value("loss", 5.0)]))
w.write(half[:len(half) // 2])        # cut short: the job ends before the rest
w.close()
# a file that is nothing but a torn header
with open(os.path.join(os.environ["TRAINCTL_TENSORBOARD_DIR"], "x.tfevents.torn"), "wb") as f:
    f.write(b"\\x10\\x00\\x00")
print("training done", flush=True)
"""


def test_corrupt_and_cut_records_are_counted(run_tc, tmp_path):
    r = run_tc("run", _spec(tmp_path, "corrupt", CORRUPT_JOB, 1))
    assert r.returncode == 0, r.stderr
    job = _job_id(r.stderr)
    assert "4 malformed lines" in r.stderr, r.stderr
    pts = _points(run_tc, job)
    assert [(p["step"], p["value"]) for p in pts] == [("1", 1.0), ("3", 3.0), ("4", 4.0)]
    show = run_tc("show", job)
    assert show.returncode == 0, show.stderr
    line = [x for x in show.stdout.splitlines() if x.startswith("malformed")]
    assert line and line[0].startswith("malformed  4 lines; rank 0: 4 (last: "), show.stdout
    assert "truncated" in line[0] or "CRC" in line[0], line


LIVE_JOB = PRELUDE + """
open(os.path.join({tmp!r}, "job-id"), "w").write(os.environ["TRAINCTL_JOB_ID"])
w = tfevents_writer.Writer(os.path.join(os.environ["TRAINCTL_TENSORBOARD_DIR"], "live"))
w.scalar("loss", 1.5, 1, WALL0 + 1)
second = tfevents_writer.record(tfevents_writer.event(WALL0 + 2, 2, [tfevents_writer.value("loss", 2.5)]))
w.write(second[:9])                   # half a record: waited on, not corrupt
w.flush()
go = os.path.join({tmp!r}, "go")
deadline = time.time() + 120
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.05)
w.write(second[9:])
w.close()
"""


def test_a_file_written_while_the_job_runs_is_followed(run_tc, trainctl, home, tmp_path):
    import os
    import subprocess
    spec = _spec(tmp_path, "live", LIVE_JOB.replace("{tmp!r}", repr(str(tmp_path))), 1)
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    proc = subprocess.Popen([str(trainctl), "run", str(spec)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (tmp_path / "job-id").exists() and (tmp_path / "job-id").read_text(),
                   what="the job to start")
        job = (tmp_path / "job-id").read_text()

        def first_point():
            r = run_tc("metrics", job, "--format", "json")
            return r.returncode == 0 and r.stdout.strip() not in ("", "[]") and json.loads(r.stdout)
        wait_until(first_point, what="the first point while the job runs")
        assert proc.poll() is None  # the job is still running
        assert [(p["step"], p["value"]) for p in _points(run_tc, job)] == [("1", 1.5)]
        (tmp_path / "go").write_text("")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "0 malformed lines" in err, err
    assert [(p["step"], p["value"]) for p in _points(run_tc, job)] == [("1", 1.5), ("2", 2.5)]


def test_spec_key_is_checked(run_tc, tmp_path):
    spec = _spec(tmp_path, "badkey", "print(1)\n", 1, "metrics: {tensorboard_dirs: logs}\n")
    r = run_tc("run", spec)
    assert r.returncode == 2
    assert "metrics.tensorboard_dirs" in r.stderr and "list of paths" in r.stderr, r.stderr
    assert "badkey.yaml:5" in r.stderr, r.stderr
