"""cosched on a Slurm cluster: the local test cluster, the window controller, its journal and placement files.

Slurm stays the scheduler: the controller only holds, pins and releases jobs of the co-scheduling partition
with Slurm's own commands, and the SPANK plugin (native/) applies each job's placement on its node.
"""
