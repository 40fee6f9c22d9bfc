"""``rollout-giveback``: rollout (``env.planners.continuous.Rollout``) that may also ask a running job to give CPUs
back. Simulated nodes only, and not in the stream registry: plans, the real runners and the Slurm controller cannot
yet change a running job's CPUs, so it lives beside the benches (``bench/stream_arrivals.py --give-back``).

The extra candidate. At an event where jobs are queued, fewer than Cmax run, no start fits the free CPUs (fewer than
N/Cmax are free) and a running job holds more than N/Cmax CPUs: the job holding most keeps N/Cmax of its CPUs, dealt
over its NUMA domains (``env.plan.allocate.dealt``: near the pages it touched), and rollout's candidates for one start
on the node so freed are valued against starting nothing now, each by rollout's own play-out (``Rollout._value``).
The best start is taken, with the change, only where it is predicted better than waiting; otherwise rollout's own
decision stands. The play-outs themselves never give back, so the candidate is judged as rollout would continue.

A job that started on all the CPUs while the node was quiet thus need not hold them through what comes next: the
choice the lone job made with no one waiting is no longer final (docs/continuous.md has the figures).
"""

from __future__ import annotations

from collections.abc import Sequence

from env.episode.stream import Decision, StreamJob, StreamView
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.allocate import dealt, plain_allocation
from env.planners.continuous import Rollout


class RolloutGiveBack(Rollout):
    name = "rollout-giveback"

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        if not node.simulated:
            raise InputError("rollout-giveback changes a running job's CPUs, which the real runners cannot do yet: "
                             "use rollout on a real node")
        super().reset(node, jobs, max_concurrency)
        self.node, self.slot, self.given = node, len(node.cpus) // max_concurrency, 0

    def search(self, view: StreamView) -> Decision:
        d = super().search(view)
        if d.starts or not view.queue or view.places() == 0 or len(view.free_cpus()) >= self.slot:
            return d
        big = [(len(r.alloc.cpus), k) for k, r in view.running.items() if len(r.alloc.cpus) > self.slot]
        if not big:
            return d
        _, jid = max(big)
        held = view.running[jid].alloc
        kept = plain_allocation(self.node, dealt(self.node, held.cpus, self.slot), memory=held.memory)
        queue = list(view.queue)
        wait = self._value(view.sim, queue, None)
        sim = view.sim.fork()
        sim.give_back(jid, kept)
        base = self.base.next_start(sim, queue, view.places())
        if base is None:
            return d
        options = [o for o in self._options(sim, queue, view.places(), base) if o is not None]
        values = [self._value(sim, queue, o) for o in options]
        best = min(range(len(options)), key=lambda k: (values[k], k))
        if not values[best] < wait:
            return d
        self.given += 1
        job, alloc = options[best]
        return Decision(starts=((job.id, alloc),), changes=((jid, kept),),
                        note=f"{jid} gives back {len(held.cpus) - self.slot} CPUs for {job.id}")


__all__ = ["RolloutGiveBack"]
