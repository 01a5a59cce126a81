#!/usr/bin/python3
"""Container start cost: the same job on the host and in an image.

One node, --nproc ranks of `/bin/true` (the job's own work is nothing, so
what is left is what starting it costs), run with `trainctl run` on the
host and with `image:` (podman, a cached local image: the image is checked
with `podman image exists`, each rank gets its own container), alternating,
--runs times each.  Prints the medians, the extra seconds per node and the
ratio.  The target (issue 14): at most 1 s extra per node.

    TRAINCTL=build/trainctl /usr/bin/python3 bench/container_bench.py --runs 11

The image is the e2e tests' (tests/e2e/image_fixture.py: built once with
mmdebstrap and cached); CONTAINERS_CONF is the tests' containers.conf.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import image_fixture  # noqa: E402


def run_job(trainctl, spec, env):
    t0 = time.monotonic()
    p = subprocess.run([trainctl, "run", "--quiet", str(spec)], env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{spec.name}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args()
    trainctl = os.environ.get("TRAINCTL", str(REPO / "build" / "trainctl"))
    why = image_fixture.podman_usable()
    if why:
        sys.exit(f"container_bench: {why}")
    with tempfile.TemporaryDirectory(prefix="ctr-bench-") as d:
        d = Path(d)
        conf = image_fixture.containers_conf(d)
        image = image_fixture.ensure_image(conf)
        env = dict(os.environ, TRAINCTL_HOME=str(d / "home"), CONTAINERS_CONF=str(conf))
        specs = {}
        for name, img in (("host", None), ("container", image)):
            p = d / f"{name}.yaml"
            p.write_text(f"name: bench-{name}\ncommand: [/bin/true]\n"
                         f"devices: {{type: cpu, per_node: {args.nproc}}}\n"
                         + (f"image: {img}\n" if img else ""))
            specs[name] = p
        times = {k: [] for k in specs}
        run_job(trainctl, specs["container"], env)  # warm the page cache of the image's layers
        for i in range(args.runs):
            order = list(specs) if i % 2 == 0 else list(reversed(specs))
            for k in order:
                times[k].append(run_job(trainctl, specs[k], env))
    load = os.getloadavg()[0]
    print(f"{args.runs} runs each, {args.nproc} ranks of /bin/true on one node, load average {load:.1f}")
    print(f"{'method':<12} {'median':>10} {'min':>10} {'max':>10}")
    for k, v in times.items():
        print(f"{k:<12} {statistics.median(v) * 1000:>8.0f} ms {min(v) * 1000:>8.0f} ms "
              f"{max(v) * 1000:>8.0f} ms")
    h, c = statistics.median(times["host"]), statistics.median(times["container"])
    print(f"extra per node: {c - h:.2f} s (target <= 1 s); container / host = {c / h:.1f}")


if __name__ == "__main__":
    main()
