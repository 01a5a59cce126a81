"""A gloo job for the watchdog tests (tests/e2e/test_watchdog.py) and
bench/watchdog_bench.py: DLLogger step records; on attempt 0 rank HANG_RANK
sleeps forever inside step HANG_AT while the others wait in all_reduce, or
rank 0 exits 1 at step FAIL_AT.  Rank 0 checkpoints every 5 steps and a
restart resumes from TRAINCTL_RESUME_FROM (step-N.pt: the next step is N+1,
or RESUME_SKIP steps later, to test the resume check)."""
import json
import os
import re
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
steps = int(os.environ.get("STEPS", "20"))
hang_at = int(os.environ.get("HANG_AT", "0"))
hang_rank = int(os.environ.get("HANG_RANK", "1"))
fail_at = int(os.environ.get("FAIL_AT", "0"))
pause = float(os.environ.get("STEP_SECONDS", "0.05"))
dist.init_process_group("gloo", timeout=timedelta(seconds=600))
start = 1
resume = os.environ.get("TRAINCTL_RESUME_FROM")
if resume:
    start = int(re.findall(r"\d+", os.path.basename(resume))[-1]) + 1
    start += int(os.environ.get("RESUME_SKIP", "0"))
    print(f"rank {rank}: resumed from {resume} at step {start}", flush=True)
ckpt_dir = os.environ["TRAINCTL_CKPT_DIR"]


def stuck_in_step():
    while True:  # a rank that never finishes its step
        time.sleep(1000)


for step in range(start, steps + 1):
    t = torch.ones(4)
    if hang_at and step == hang_at and rank == hang_rank and attempt == 0:
        stuck_in_step()
    if fail_at and step == fail_at and rank == 0 and attempt == 0:
        print(f"rank 0: failing at step {step}", flush=True)
        sys.exit(1)
    dist.all_reduce(t)
    print("DLLL " + json.dumps({"type": "LOG", "step": step, "data": {"loss": 1.0 / step}}),
          flush=True)
    if rank == 0 and step % 5 == 0:
        tmp = os.path.join(ckpt_dir, f".step-{step}.tmp")
        with open(tmp, "w") as f:
            f.write(str(step))
        os.replace(tmp, os.path.join(ckpt_dir, f"step-{step}.pt"))
    time.sleep(pause)
dist.destroy_process_group()
