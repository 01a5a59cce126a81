#!/usr/bin/python3
"""torchrun for Debian's torch 1.13 on Python 3.11.

Why: torch 1.13's Std.from_str (torch/distributed/elastic/multiprocessing/api.py)
maps "0".."3" to a Std member by iterating `for s in Std`. Since Python 3.11,
iterating an IntFlag yields only canonical single-bit members, so NONE (0) and
ALL (3) are never found, from_str returns None, and torchrun dies in to_map()
with "'NoneType' object has no attribute 'get'" even with default flags.
The fix is Std(int(v)), which works on every Python version.

Usage: python3 torchrun_wrapper.py <torchrun arguments...>
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api as _api


def _from_str(cls, vm):
    if re.match(_api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(_api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{_api._VALUE_REGEX}> or <{_api._MAPPING_REGEX}>")


_api.Std.from_str = classmethod(_from_str)

if __name__ == "__main__":
    from torch.distributed.run import main

    sys.argv[0] = "torchrun"
    main()
