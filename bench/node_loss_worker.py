"""The worker of bench/node_loss_bench.py: a small torch/gloo data-parallel
loop, the same for trainctl and torchrun.  Each step appends one JSON line
to OUT: {"t", "round" (TORCHELASTIC_RESTART_COUNT), "world", "rank", "step",
and on a process's first step "start", "import_s" (torch), "init_s" (the
gloo group), "load_s" (the checkpoint)}.  Rank 0
checkpoints every step to CKPT; a new process resumes from it.  Ends when
the file STOP exists.  A peer that dies fails the next all_reduce: the
process exits 1, as a real job's ranks do.

    python3 node_loss_worker.py OUT CKPT STOP
"""
import time

T_START = time.time()  # the process's start, near enough: before torch is imported

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from datetime import timedelta  # noqa: E402

os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # every "node" is this host

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

out, ckpt, stop = sys.argv[1:4]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
rnd = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
t_import = time.time()
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
t_init = time.time()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step, t0 = 0, time.time()
if os.path.exists(ckpt):
    st = torch.load(ckpt)
    model.load_state_dict(st["model"])
    opt.load_state_dict(st["opt"])
    step = st["step"]
load_s = time.time() - t0
first = True
while not os.path.exists(stop):
    x = torch.randn(64, 256)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world
    opt.step()
    step += 1
    line = {"t": time.time(), "round": rnd, "world": world, "rank": rank, "step": step,
            "pid": os.getpid()}
    if first:
        # where a new process's time went: start, torch imported, the group formed, the load
        line.update(start=T_START, import_s=round(t_import - T_START, 3),
                    init_s=round(t_init - t_import, 3), load_s=round(load_s, 4))
        first = False
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps(line) + "\n").encode())
    os.close(fd)
    if rank == 0:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step},
                   ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)
    time.sleep(0.2)
dist.destroy_process_group()
