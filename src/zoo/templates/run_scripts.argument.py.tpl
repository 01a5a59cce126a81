"""argument.py -- every argument of @NAME@'s unified run interface, in one place.

The ModelZoo convention (trainctl docs/zoo.md): model_name, batch_size,
epoch, step, dataset_path, lr, device, autocast; nproc_per_node for
single-node DDP; nnode, node_rank, master_addr, master_port for multi-node.
Arguments not listed here (model.yaml `others`) are passed on to train.py.
"""
import argparse


def str2bool(v):
    if isinstance(v, bool):
        return v
    if v.lower() in ("true", "t", "yes", "y", "1"):
        return True
    if v.lower() in ("false", "f", "no", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, not {v!r}")


# launcher-only arguments: they shape the workers, train.py does not get them
LAUNCH_ARGS = ("nproc_per_node", "nnode", "node_rank", "master_addr", "master_port")


def parser():
    p = argparse.ArgumentParser(description="@NAME@: unified run interface")
    p.add_argument("--model_name", default="@name@", help="model to train")
    p.add_argument("--batch_size", type=int, default=32, help="per worker")
    p.add_argument("--epoch", type=int, default=1, help="epochs")
    p.add_argument("--step", type=int, default=-1, help="steps per epoch (-1: whole epoch)")
    p.add_argument("--dataset_path", default="", help="data set folder")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate")
    p.add_argument("--device", default="cpu", help="cpu, cuda, sdaa, ...")
    p.add_argument("--autocast", type=str2bool, default=False, help="mixed precision")
    p.add_argument("--nproc_per_node", type=int, default=1, help="workers on this node (DDP)")
    p.add_argument("--nnode", "--nnodes", dest="nnode", type=int, default=1, help="nodes")
    p.add_argument("--node_rank", type=int, default=0, help="this node's index")
    p.add_argument("--master_addr", default="127.0.0.1", help="rank 0's address")
    p.add_argument("--master_port", type=int, default=0, help="rank 0's port (0: a free one)")
    return p


def parse_args(argv=None):
    """(known arguments, the rest as a list to pass on)"""
    return parser().parse_known_args(argv)


def train_argv(args):
    """The known arguments train.py takes, as --key value."""
    out = []
    for k, v in vars(args).items():
        if k not in LAUNCH_ARGS:
            out += [f"--{k}", str(v)]
    return out
