"""test_vendor_npu.py -- NPU device numbering as CANN and the real launch
scripts have it (docs/environment.md, "Devices"), on fake NPUs 4..7:

* mindspore / tensorflow start the rank-table way (MindSpore's
  run_distribute_train.sh): DEVICE_ID is the physical id that hccl.json
  names for RANK_ID, and ASCEND_RT_VISIBLE_DEVICES is not set;
* pytorch sees ASCEND_RT_VISIBLE_DEVICES=4,5,6,7 and, as CANN documents
  for that variable, addresses its devices by index: DEVICE_ID and
  ASCEND_DEVICE_ID are the local rank.

Each worker resolves its device the way CANN does and checks it against the
rank table, so a DEVICE_ID that names no visible device fails the job.
"""
import json
import os
import socket
import struct
import subprocess

from conftest import PYTHON

HCCN = "".join(f"address_{i}=192.168.100.{100 + i}\n" for i in range(8))

# What CANN does with the variables: with ASCEND_RT_VISIBLE_DEVICES set the
# process sees len(visible) devices, index i being physical visible[i];
# without it DEVICE_ID is the physical id.  The device must be the one
# hccl.json gives this RANK_ID.
CHECKER = r'''
import json, os, sys
e = dict(os.environ)
e.setdefault("RANK_ID", e["RANK"])  # pytorch's profile: the torchrun set
table = json.load(open(e["RANK_TABLE_FILE"]))
mine = [d for s in table["server_list"] for d in s["device"] if d["rank_id"] == e["RANK_ID"]]
vis = e.get("ASCEND_RT_VISIBLE_DEVICES")
dev = int(e["DEVICE_ID"])
if e.get("ASCEND_DEVICE_ID") not in (None, e["DEVICE_ID"]):
    sys.exit("ASCEND_DEVICE_ID %s disagrees with DEVICE_ID %s" % (e["ASCEND_DEVICE_ID"], dev))
if vis is not None:
    ids = [int(x) for x in vis.split(",")]
    if not 0 <= dev < len(ids):
        sys.exit("DEVICE_ID %d: no such device, %d are visible (%s)" % (dev, len(ids), vis))
    dev = ids[dev]
if [d["device_id"] for d in mine] != [str(dev)]:
    sys.exit("rank %s would use npu %d, the rank table says %s" % (e["RANK_ID"], dev, mine))
print("rank", e["RANK_ID"], "npu", dev, "visible", vis, "DEVICE_ID", e["DEVICE_ID"],
      "DEVICE_NUM", e.get("DEVICE_NUM"), "SERVER_ID", e.get("SERVER_ID"),
      "HCCL", os.path.basename(e.get("MINDSPORE_HCCL_CONFIG_PATH", "-")), flush=True)
'''


def _spec(tmp_path, name, framework):
    (tmp_path / "hccn.conf").write_text(HCCN)
    (tmp_path / "check.py").write_text(CHECKER)
    s = tmp_path / f"{name}.yaml"
    s.write_text(f"""
name: {name}
framework: {framework}
command: ["{PYTHON}", "check.py"]
workdir: {tmp_path}
devices: {{type: npu, ids: [4, 5, 6, 7], hccn_conf: hccn.conf}}
""")
    return s


def test_mindspore_rank_table_mode_physical_ids(run_tc, tmp_path):
    p = run_tc("run", _spec(tmp_path, "ms-4567", "mindspore"), env={"TRAINCTL_FAKE_DEVICES": "npu:8"})
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(4):
        assert (f"rank {r} npu {4 + r} visible None DEVICE_ID {4 + r} DEVICE_NUM 4 SERVER_ID 0 "
                f"HCCL hccl.json") in p.stdout, p.stdout
    run_dir = json.loads(run_tc("show", "--json", "ms-4567").stdout)["run_dir"]
    env = open(os.path.join(run_dir, "job.env")).read()
    assert "ASCEND_RT_VISIBLE_DEVICES" not in env, env


def test_tensorflow_rank_table_mode_physical_ids(run_tc, tmp_path):
    p = run_tc("run", _spec(tmp_path, "tf-4567", "tensorflow"), env={"TRAINCTL_FAKE_DEVICES": "npu:8"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 3 npu 7 visible None DEVICE_ID 7" in p.stdout, p.stdout


def test_pytorch_visible_devices_and_index(run_tc, tmp_path):
    p = run_tc("run", _spec(tmp_path, "pt-4567", "pytorch"), env={"TRAINCTL_FAKE_DEVICES": "npu:8"})
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(4):
        assert f"rank {r} npu {4 + r} visible 4,5,6,7 DEVICE_ID {r} " in p.stdout, p.stdout


def _default_route_ipv4():
    """The IPv4 address of the default route's interface (None without one)."""
    best = None
    with open("/proc/net/route") as f:
        for line in f.readlines()[1:]:
            w = line.split()
            if len(w) >= 8 and int(w[1], 16) == 0 and int(w[7], 16) == 0 and int(w[3], 16) & 1:
                if best is None or int(w[6]) < best[1]:
                    best = (w[0], int(w[6]))
    if best is None:
        return None
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", best[0]],
                         capture_output=True, text=True).stdout.split()
    return out[out.index("inet") + 1].split("/")[0] if "inet" in out else None


def test_server_id_is_the_default_route_address(run_tc, tmp_path):
    p = run_tc("run", _spec(tmp_path, "ms-sid", "mindspore"), env={"TRAINCTL_FAKE_DEVICES": "npu:8"})
    assert p.returncode == 0, p.stdout + p.stderr
    run_dir = json.loads(run_tc("show", "--json", "ms-sid").stdout)["run_dir"]
    table = json.load(open(os.path.join(run_dir, "hccl.json")))
    sid = table["server_list"][0]["server_id"]
    want = _default_route_ipv4()
    if want:
        assert sid == want, (sid, want)
    else:  # no default route: a non-loopback address of this host, or 127.0.0.1
        socket.inet_aton(sid)
        assert struct.unpack("!I", socket.inet_aton(sid))[0] >> 24 != 127 or sid == "127.0.0.1"
