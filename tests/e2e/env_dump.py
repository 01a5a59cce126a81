#!/usr/bin/python3
"""Worker for the environment-parity test: writes its whole os.environ as JSON
to $ENV_DUMP_DIR/rank-<RANK>.json and exits 0."""
import json
import os


def main():
    out_dir = os.environ["ENV_DUMP_DIR"]
    rank = os.environ.get("RANK", "unknown")
    path = os.path.join(out_dir, f"rank-{rank}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(os.environ), f, indent=1, sort_keys=True)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
