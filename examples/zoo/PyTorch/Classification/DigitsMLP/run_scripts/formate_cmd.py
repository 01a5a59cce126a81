"""formate_cmd.py -- print the command a run executes, before it runs (ModelZoo habit)."""
import shlex


def format_cmd(cmd, nproc=1, nnode=1):
    line = " ".join(shlex.quote(str(c)) for c in cmd)
    return f"command ({nproc} worker{'s' if nproc != 1 else ''} x {nnode} node{'s' if nnode != 1 else ''}): {line}"


def print_cmd(cmd, nproc=1, nnode=1):
    print(format_cmd(cmd, nproc, nnode), flush=True)
