"""test_vendor_ckpt.py -- `trainctl ckpt inspect` on what torch.save writes
(docs/checkpoints.md): its default zip archive is listed from the zip's
central directory (records, sizes, tensor storages), a legacy pickle and a
truncated archive are errors (exit 2) that say what is read.  Files are
written by the real torch (Debian python3-torch)."""
import json
import subprocess

from conftest import PYTHON

SAVE = """import sys, torch
torch.save({"w": torch.zeros(3, 4), "b": torch.ones(5, dtype=torch.float64), "step": 7},
           sys.argv[1], **({"_use_new_zipfile_serialization": False} if sys.argv[2] == "legacy" else {}))
"""


def _save(tmp_path, name, how="zip"):
    path = tmp_path / name
    subprocess.run([PYTHON, "-c", SAVE, str(path), how], check=True, timeout=300)
    return path


def test_torch_zip_is_listed(run_tc, tmp_path, torch_available):
    pt = _save(tmp_path, "model.pt")
    p = run_tc("ckpt", "inspect", pt)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    # 3*4 float32 + 5 float64 = 48 + 40 bytes of storage, in two storages
    assert f"{pt}: torch.save zip archive, " in out and "2 tensor storages, 88 bytes of storage data" in out, out
    assert "model/data.pkl" in out and "data.pkl, a pickle, which trainctl does not run" in out, out
    assert "over the limit" not in out + p.stderr
    p = run_tc("ckpt", "inspect", "--json", pt)
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["format"] == "torch-zip" and j["storages"] == 2 and j["storage_bytes"] == 88
    names = {r["name"]: r for r in j["records"]}
    assert "model/data.pkl" in names and "model/version" in names, names
    sizes = sorted(r["bytes"] for n, r in names.items() if n.startswith("model/data/"))
    assert sizes == [40, 48], names
    assert j["bytes"] == pt.stat().st_size


def test_legacy_pickle_and_truncated_zip_are_errors(run_tc, tmp_path, torch_available):
    legacy = _save(tmp_path, "old.pt", "legacy")
    p = run_tc("ckpt", "inspect", legacy)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{legacy}: a pickle (torch.save with _use_new_zipfile_serialization=False)" in p.stderr, p.stderr
    pt = _save(tmp_path, "model.pt")
    cut = tmp_path / "cut.pt"
    cut.write_bytes(pt.read_bytes()[:-40])  # the end of the central directory gone
    p = run_tc("ckpt", "inspect", cut)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{cut}: a zip archive (torch.save's format) whose " in p.stderr, p.stderr
    assert "over the limit" not in p.stderr
