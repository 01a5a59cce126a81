"""A node's processes on the localhost Slurm cluster, found by what they
are: the `trainctl supervise-node JOB` running as srun's task `node`, and
everything under it, killed at once as when its host dies (the tests of
lost nodes: test_node_loss.py, test_node_loss_elastic.py)."""
import os
import signal


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def node_supervisor(job, node):
    """pid of `trainctl supervise-node JOB` running as srun's task `node` (SLURM_NODEID), or None"""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        argv = _read(f"/proc/{name}/cmdline").split(b"\0")
        if b"supervise-node" not in argv or job.encode() not in argv:
            continue
        env = _read(f"/proc/{name}/environ").split(b"\0")
        if f"SLURM_NODEID={node}".encode() in env:
            return int(name)
    return None


def process_tree(pid):
    """pid and every process below it"""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat").decode(errors="replace")
        try:
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def kill_node(job, node):
    """SIGKILL node `node`'s supervisor and everything under it at once, as when its host dies"""
    pid = node_supervisor(job, node)
    assert pid, f"no supervise-node {job} for node {node}"
    for p in process_tree(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pid
