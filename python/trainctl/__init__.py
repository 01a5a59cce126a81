"""trainctl: the Python client of `trainctl server`, and (``trainctl.job``)
the helper for code running under trainctl.

    import trainctl
    c = trainctl.Client()                  # $TRAINCTL_SERVER / $TRAINCTL_TOKEN / the local socket
    job = c.submit("job.yaml", set={"args.lr": 0.01})
    job.wait()                             # the final state

The in-job helper is imported on its own (``from trainctl import job``):
importing the client does not load it, and it needs no server.
See docs/python.md.
"""
from .client import Client, Event, Job, LogLine, MetricSeries, Point, Sweep, Trial
from .errors import (BadSpec, Conflict, Forbidden, NotFound, TrainctlError, Unauthorized,
                     Unavailable, WaitTimeout)

__version__ = "0.1.0"

__all__ = [
    "Client", "Job", "Sweep", "Trial", "Event", "Point", "MetricSeries", "LogLine",
    "TrainctlError", "NotFound", "Forbidden", "Unauthorized", "BadSpec", "Conflict",
    "Unavailable", "WaitTimeout",
]
