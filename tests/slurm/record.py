"""Run inside a Slurm job: prints one JSON line of what the task was given, read from /proc.

Used by the cluster tests: the CPUs the task may run on (/proc/self/status Cpus_allowed_list), its memory
policy (the policy column of /proc/self/numa_maps' first mapping: default, bind:N, interleave:N, local),
whether the pinning runtime is mapped (/proc/self/maps), the node and job id Slurm set, and a timestamp.
"""

import json
import os
import sys
import time


def main() -> None:
    status = open("/proc/self/status").read().splitlines()
    cpus = next(line.split(":", 1)[1].strip() for line in status if line.startswith("Cpus_allowed_list"))
    first = open("/proc/self/numa_maps").readline().split()
    maps = open("/proc/self/maps").read()
    print(json.dumps({"what": sys.argv[1], "t": time.time(), "job": os.environ.get("SLURM_JOB_ID"),
                      "node": os.environ.get("SLURMD_NODENAME"), "cpus": cpus,
                      "mempolicy": first[1] if len(first) > 1 else "", "pinrt": "libpinrt" in maps}), flush=True)


if __name__ == "__main__":
    main()
