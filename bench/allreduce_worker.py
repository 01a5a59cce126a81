#!/usr/bin/python3
"""Launch-benchmark worker: join a gloo group, all_reduce one small tensor,
leave, exit 0. Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (env://)."""
import os
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", init_method="env://")
    t = torch.ones(4)
    dist.all_reduce(t)
    world = dist.get_world_size()
    dist.destroy_process_group()
    if t[0].item() != world:
        print(f"rank {os.environ.get('RANK')}: all_reduce gave {t[0].item()}, want {world}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
