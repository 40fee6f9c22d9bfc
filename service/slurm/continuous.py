"""Continuous release (``cosched slurm run --mode continuous``), mixed into service/slurm/controller.Controller: no
windows, no group barriers. At every event on a node (one of its jobs ended, or jobs are waiting and it has room)
the controller asks the decision code of continuous mode (service/slurm/decider.py -> service.decide) which held
jobs start there now, with which CPUs, memory policy, ways and caps, and which new ways / caps the jobs running
there get; the chosen jobs are journaled (one transaction: a one-group window already dispatched to the node),
their placement files written, pinned to the node and released in one request (controller._start_group, the same
path as a group's). No node waits for another, and no job waits for a group.

How it learns of a job's end: the SPANK plugin's end record (``placement_dir/ended/JOB.batch.0``, written on the
node the moment the job's script ends, before slurmd tells slurmctld) or, for an end the plugin could not record
(a node that failed, a job cancelled before its task ran), Slurm's queue, which the controller reads every cycle
anyway. The record comes first: Slurm shows the job COMPLETING a while longer (epilog, its report), and a decision
need not wait for that; the partition's OverSubscribe=FORCE:Cmax lets the next job in beside a completing one.

Which nodes: while the idle usable nodes could give every held job one of its own, the oldest runs alone with a
whole idle node (time sharing's allocation: sharing would only slow it down) once it has waited ``--gather``
seconds for others (a burst submitted one job at a time then lands together), unless its program runs as fast on a
slot (``env.planners.streams.LONE_MIN_GAIN``: the whole node would gain it nothing); the trace simulation's
``cosched`` makes the same choice (service/slurm/tracesim_policies.Cosched, docs/slurm-scale.md). Otherwise every
node with room decides from the queue's head.

Exactly once holds as in group mode: a decision is journaled before any Slurm call, a journaled job is never
decided again unless its group went back to waiting with none of it started, and every recovery path of
service/slurm/recovery.py applies to these one-group windows unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from env.errors import CoschedError
from env.node.cpulist import format_cpulist, parse_cpulist
from env.node.resctrl import group_name
from env.node.spec import NodeSpec
from env.plan.models import NAME_PATTERN
from service.lengths import Lengths
from service.slurm import placement
from service.slurm.decider import Queued, Running, decide, max_jobs
from service.slurm.journal import JobRow, NewJob
from service.slurm.recovery import Recovery
from service.slurm.slurmcmd import SlurmJob, SlurmNode

if TYPE_CHECKING:
    from service.slurm.controller import StepResult

_NAME = re.compile(NAME_PATTERN)
_MEMORY = {v: k for k, v in placement.MEMPOLICY.items()}  # the plugin's memory policy -> the decision's


class Continuous(Recovery):
    plan_node: Callable[[], NodeSpec | None]
    _planned_ids: set[int]  # journaled jobs of groups that wait for a node again (none of them started)
    _c: dict  # this life's state: t0, queued, last decision per node, profiles unknown, allocations, what was said

    def _decide_nodes(self, jobs: dict[int, SlurmJob], nodes: list[SlurmNode], res: StepResult) -> None:
        """One decision per node at which something happened since its last one."""
        c = self._c
        spec = self.plan_node()
        if spec is None:
            return
        now = self.clock()
        t0 = c.setdefault("t0", now)
        queue = self._held_queue(jobs)
        c["queued"] = len(queue)
        said: set[int] = c.setdefault("bad_solo_said", set())
        for j in queue:
            if j.bad_solo_s is not None and j.job_id not in said:
                said.add(j.job_id)
                self.log(f"job {j.job_id} ({j.name}): its comment's solo_s={j.bad_solo_s!r} is not seconds in (0, 1e8]: "
                         "decided with its program's length")
        running = self._running(jobs, spec)
        profiles = {j.profile for j in queue} | {r.profile for rs in running.values() for r in rs if r is not None}
        lengths = self._lengths(spec, profiles) if self.cfg.learn_lengths else {}
        foreign = _foreign_nodes(jobs, self.cfg.partition)
        unknown: set[str] = c.setdefault("unknown", set())
        last: dict[str, tuple] = c.setdefault("last", {})  # node -> (running ids, queue head ids) last decided at
        cmax = max_jobs(spec, self.cfg.cmax)
        if cmax < self.cfg.cmax and not c.get("cmax_said"):
            c["cmax_said"] = True
            self.log(f"continuous: at most {cmax} jobs at once on a node of {len(spec.cpus)} CPUs (one per CPU; "
                     f"--cmax {self.cfg.cmax})")
        if queue and nodes and all(n.cpus != len(spec.cpus) for n in nodes) and not c.get("shape_said"):
            c["shape_said"] = True
            self.log(f"continuous: the partition's nodes have {sorted({n.cpus for n in nodes})} CPUs and the node "
                     f"decisions are made for ({spec.name}) has {len(spec.cpus)}: nothing starts; run the controller "
                     "with --plan-node of the partition's node kind")
        usable = [n for n in sorted(nodes, key=lambda n: n.name)
                  if not n.unusable and n.name not in foreign and n.cpus == len(spec.cpus)]
        # The oldest held job needs a whole node (no profile known): the usable node with the fewest jobs running
        # takes nothing new until it is empty, so that a stream never keeps that job waiting.
        drain = None
        if queue and usable and (not _NAME.match(queue[0].profile) or queue[0].profile in unknown):
            drain = min(usable, key=lambda n: len(running.get(n.name, []))).name
        kept = self._kept_off(jobs, [n.name for n in usable])  # a slurmd that ran a job's id refuses it
        queue = self._alone_while_nobody_waits(queue, usable, running, kept, res,
                                               lambda j: self._gains_alone(spec, cmax, j.profile, unknown))
        for node in usable:
            if not queue:
                break
            here = running.get(node.name, [])
            if node.name == drain and here:
                continue
            if any(r is None for r in here) or len(here) >= cmax:
                continue  # a job alone with the whole node, or full
            runs = [r for r in here if r is not None]
            fits = [j for j in queue if node.name not in kept.get(j.job_id, ())]
            if not fits:
                continue
            if not runs and (not _NAME.match(fits[0].profile) or fits[0].profile in unknown):
                alone = fits[0]
                self._start(node.name, [(alone, None)], "runs alone with the whole node (no profile known "
                            "for it)", None, res)
                queue = [j for j in queue if j is not alone]
                last.pop(node.name, None)
                continue
            head = [j for j in fits if _NAME.match(j.profile) and j.profile not in unknown][: self.cfg.window]
            sig = (tuple(sorted(r.id for r in runs)), tuple(j.job_id for j in head))
            if not head or last.get(node.name) == sig:
                continue
            try:
                # a job's own solo_s (its comment) before its program's learned length
                d = decide(spec, [replace(r, solo_s=r.solo_s or lengths.get(r.profile)) for r in runs],
                           [Queued(j.job_id, j.profile, j.submit_time - t0, j.solo_s or lengths.get(j.profile))
                            for j in head],
                           self.cfg.cmax, now_s=max(0.0, now - t0), policy=self.cfg.policy, window=self.cfg.window)
            except CoschedError as exc:  # the node's state as the controller sees it was refused: said, not retried
                last[node.name] = sig
                self.log(f"node {node.name}: no decision ({exc}); its held jobs wait for the next event")
                continue
            if d.fallback and not c.get("fallback_said"):
                c["fallback_said"] = True
                self.log(f"continuous: {d.fallback}; deciding with {d.policy}")
            if d.unknown:
                by_id = {j.job_id: j for j in head}
                unknown.update(by_id[i].profile for i in d.unknown)
                continue  # decided again next cycle without them
            ended = sorted(set(last[node.name][0]) - set(sig[0])) if node.name in last else []
            last[node.name] = sig
            if d.changes:
                self._changes(node.name, d.changes)
            if not d.starts:
                continue
            by_id = {j.job_id: j for j in queue}
            chosen = [(by_id[i], a) for i, a in d.starts]
            why = (f"after {','.join(map(str, ended))} ended" if ended else "with room") + f" ({d.policy}" + (
                f", predicted makespan of its known jobs {d.predicted_makespan_s:.1f} s)" if d.predicted_makespan_s
                else ")") + (f"; {d.note}" if d.note else "")
            self._start(node.name, chosen, why, d, res)
            started = {j.job_id for j, _ in chosen}
            queue = [j for j in queue if j.job_id not in started]
            last[node.name] = (tuple(sorted([*sig[0], *started])), sig[1])

    def _alone_while_nobody_waits(self, queue: list[SlurmJob], usable: list[SlurmNode], running: dict,
                                  kept: dict[int, set[str]], res: StepResult,
                                  gains: Callable[[SlurmJob], bool]) -> list[SlurmJob]:
        """While the idle usable nodes are at least as many as the held jobs, the oldest starts alone with a whole
        idle node (the first it need not keep off), once it has waited gather_s for others (a burst submitted one
        job at a time lands together, and shares), unless its program gains nothing from the whole node (``gains``),
        which leaves it to the nodes' decisions; returns the queue left to them."""
        idle = [n.name for n in usable if not running.get(n.name)]
        shares: list[SlurmJob] = []
        for i, j in enumerate(queue):
            if len(idle) < len(shares) + len(queue) - i:
                return shares + queue[i:]  # a node of its own for every held job no longer
            if self.clock() - j.submit_time < self.cfg.gather_s:
                return shares  # nobody waits yet: it waits for the rest of a burst, if one comes
            if not gains(j):
                shares.append(j)
                continue
            node = next((n for n in idle if n not in kept.get(j.job_id, ())), None)
            if node is None:
                return shares + queue[i:]
            self._start(node, [(j, None)], "runs alone with the whole node (nobody waits for a node)", None, res)
            idle.remove(node)
            running[node] = [None]
        return shares

    def _gains_alone(self, spec: NodeSpec, cmax: int, profile: str, unknown: set[str]) -> bool:
        """Whether a job of ``profile`` gains from a whole node over one of packing's slots (at least LONE_MIN_GAIN
        times faster, the node model's times; the trace simulation's rule). A program the model does not know: yes
        (the node's decision would not place it)."""
        memo: dict[tuple, bool] = self._c.setdefault("gains_alone", {})
        key = (spec.name, len(spec.cpus), cmax, profile)
        if key not in memo:
            from env.episode.stream import program_for
            from env.planners.streams import LONE_MIN_GAIN, slot_slowdown

            try:
                memo[key] = (not _NAME.match(profile) or profile in unknown
                             or slot_slowdown(spec, program_for(spec, profile)[0], cmax) >= LONE_MIN_GAIN)
            except (CoschedError, KeyError):
                memo[key] = True
        return memo[key]

    def _start(self, node: str, chosen: list[tuple[SlurmJob, object]], why: str, d: object, res: StepResult) -> None:
        """Journals the decision (before any Slurm call); _dispatch writes the placements and releases the jobs."""
        spec = self.plan_node()
        resctrl = False
        if spec is not None and not spec.simulated:
            from env.plan.launch import enforcement

            e = enforcement(spec)
            resctrl = e.method == "resctrl" and (e.l3 or e.mem_bw)
        new, doc = [], []
        for sj, alloc in chosen:
            lines = None if alloc is None else placement.decided_lines(
                alloc, spec, pinrt="pinrt" in sj.options, pinrt_env=self.cfg.pinrt_env,
                resctrl_group=group_name(0, str(sj.job_id)) if resctrl else None)
            new.append(NewJob(sj.job_id, 0, sj.profile, sj.options, lines, float(sj.submit_time)))
            expect = getattr(d, "expected", {}).get(sj.job_id)
            own = sj.solo_s is not None  # its own length (its comment): it teaches its program nothing
            doc.append({"id": sj.job_id, "profile": sj.profile,
                        "allocation": alloc.model_dump(mode="json") if alloc is not None else None,  # type: ignore[attr-defined]
                        **({"solo_s": round(expect[0], 3), "predicted_s": round(expect[1], 3)} if expect else {}),
                        **({"own_solo_s": True} if own else {})})
            if expect and not own and "lengths" in self._c:
                self._c["lengths"].started(sj.job_id, sj.profile, expect)
        pred = getattr(d, "predicted_makespan_s", None)
        wid = self.journal.add_decision(node, json.dumps({"mode": "continuous", "node": node, "starts": doc,
                                                          "policy": getattr(d, "policy", None), "predicted_makespan_s": pred,
                                                          "note": getattr(d, "note", None)}),
                                        alloc is None, pred, new)
        known = self._journaled()
        for nj in new:
            known[nj.job_id] = int(nj.eligible)
            self._unplanned.pop(nj.job_id, None)
            self._planned_ids.discard(nj.job_id)
        for sj, alloc in chosen:
            if alloc is not None:
                self._c.setdefault("allocs", {})[sj.job_id] = alloc
        res.planned += len(new)
        res.windows += 1
        what = ", ".join(f"{sj.job_id} ({sj.profile}) on CPUs {format_cpulist(alloc.cpus)}"  # type: ignore[attr-defined]
                         if alloc is not None else f"{sj.job_id} ({sj.profile})" for sj, alloc in chosen)
        self.log(f"node {node}: start {what} {why} [decision {wid}]")

    def _lengths(self, spec: NodeSpec, profiles: set[str]) -> dict[str, float]:
        """Each program's time alone to decide with (service/lengths.Lengths), after learning from the jobs
        whose ends the plugin recorded since the last cycle (their start and end records). A new life of the
        controller first learns again from its journal: each start's decision keeps the time alone and the seconds
        predicted it was made with, and the plugin's records stay, so a restart forgets nothing."""
        lengths: Lengths | None = self._c.get("lengths")
        if lengths is None:
            lengths = self._c["lengths"] = Lengths(spec)
            current = {r.job_id: r.window_id for r in self.journal.all_jobs()}
            for wid, _, text in self.journal.windows():
                try:
                    doc = json.loads(text)
                except ValueError:
                    continue
                if not isinstance(doc, dict) or doc.get("mode") != "continuous":
                    continue
                for st in doc.get("starts") or []:  # a job id Slurm gave again is learned from its latest start only
                    if (current.get(st.get("id")) == wid and st.get("solo_s") and st.get("predicted_s")
                            and not st.get("own_solo_s")):
                        lengths.started(st["id"], st["profile"], (st["solo_s"], st["predicted_s"]))
            n = self._learn(lengths, quiet=True)
            if n:
                self.log(f"continuous: lengths learned again from the journal ({n} of its jobs ended): " + ", ".join(
                    f"{p} {t:.1f} s" for p, t in sorted(lengths.solo_s(lengths.seen).items())))
        self._learn(lengths)
        return lengths.solo_s(profiles)

    def _learn(self, lengths: Lengths, quiet: bool = False) -> int:
        """Learns from the waiting jobs whose end the plugin recorded; how many taught something. A job _running
        found running without an end record this cycle is not read again; one neither running nor recorded as ended
        (Slurm ended it where the plugin could not record it) teaches nothing and is no longer waited for."""
        pdir, n, running = self.cfg.placement_dir, 0, set(self._c.get("watch", ()))
        for jid in [j for j in lengths.waiting if j not in running]:
            end = placement.ended(pdir, jid)
            start = placement.started(pdir, jid) if end is not None else None
            ok = end is not None and end.fields.get("exit") == "0" and "signal" not in end.fields and \
                start is not None and start.time > 0
            line = lengths.ended(jid, end.time - start.time if ok else None)  # type: ignore[union-attr]
            n += line is not None
            if line and not quiet:
                self.log(line)
        return n

    def _held_queue(self, jobs: dict[int, SlurmJob]) -> list[SlurmJob]:
        """The partition's held jobs no decision has started, oldest first (a job of a group that waits for a node
        again, none of it started, is decided again)."""
        known = self._journaled()
        out = []
        for j in jobs.values():
            if not (j.partition == self.cfg.partition and j.managed and j.held):
                continue
            if j.job_id in known and not self._same(known[j.job_id], j):
                self._retire(j, known.pop(j.job_id))
            if j.job_id in known:
                if j.job_id not in self._active:
                    self._held_again(j)
                    continue
                if j.job_id not in self._planned_ids:
                    continue  # dispatched or released: _start_group and the reconcile see to it
            if placement.started(self.cfg.placement_dir, j.job_id) is not None:
                continue  # never decided twice (_started_before says so when its group comes up)
            out.append(j)
        return sorted(out, key=lambda j: (j.submit_time, j.job_id))

    def _running(self, jobs: dict[int, SlurmJob], spec: NodeSpec) -> dict[str, list[Running | None]]:
        """node -> its jobs released or about to be, that have not ended (None: one alone with the whole node). An
        end is the plugin's record, or Slurm's word when the plugin could not write one."""
        pdir = self.cfg.placement_dir
        nodes = {(g.window_id, g.idx): g.node for g in self.journal.groups(("dispatched", "released")) if g.node}
        allocs: dict = self._c.setdefault("allocs", {})
        out: dict[str, list[Running | None]] = {}
        watch: list[int] = []  # the running jobs, whose end records the loop looks for between cycles
        now = self.clock()
        for (wid, idx), rows in self.journal.active_jobs().items():
            node = nodes.get((wid, idx))
            if node is None:
                continue
            for r in rows:
                sj = jobs.get(r.job_id)
                if r.status == "planned" or sj is None or sj.finished or placement.ended(pdir, r.job_id) is not None:
                    continue
                watch.append(r.job_id)
                if r.placement is None:
                    out.setdefault(node, []).append(None)
                    continue
                alloc = allocs.get(r.job_id) or _allocation(r, spec)
                if alloc is None:
                    out.setdefault(node, []).append(None)
                    continue
                start = placement.started(pdir, r.job_id)
                ran = now - start.time if start is not None else (now - sj.start_time if sj.start_time else 0.0)
                out.setdefault(node, []).append(Running(r.job_id, r.profile, alloc, max(0.0, ran), sj.solo_s))
        self._c["watch"] = watch
        return out

    def _end_recorded(self) -> bool:
        """Whether the plugin recorded the end of a job that ran at the last decision (the loop's cue)."""
        pdir = self.cfg.placement_dir
        return any(placement.ended(pdir, jid) is not None for jid in self._c.get("watch", ()))

    def _changes(self, node: str, changes: list) -> None:
        """New ways / caps of running jobs: written to each one's resctrl group where this host has it, else said
        (once) not enforced."""
        from pathlib import Path

        spec = self.plan_node()
        root = Path((spec.resctrl_path if spec is not None else None) or "/sys/fs/resctrl")
        for jid, alloc in changes:
            row = self.journal.job(jid)
            grp = next((ln.split("=", 1)[1] for ln in (row.placement or []) if ln.startswith("resctrl_group=")),
                       None) if row is not None else None
            target = root / grp / "schemata" if grp else None
            if target is None or not target.exists():
                if not self._c.get("changes_said"):
                    self._c["changes_said"] = True
                    self.log(f"continuous: new ways / caps for running jobs (job {jid} on {node}) are decided but not "
                             f"enforced: {'no resctrl group ' + str(target.parent) if target else 'no resctrl group for it (no CAT or MBA on the plan node)'}")
                continue
            lines = placement.decided_lines(alloc, spec, pinrt=False, resctrl_group=grp)
            text = "".join(ln.split("=", 1)[1] + "\n" for ln in lines if ln.startswith(("l3_schemata=", "mb_schemata=")))
            target.write_text(text)
            self._c.setdefault("allocs", {})[jid] = alloc
            self.log(f"node {node}: job {jid} now {text.strip().replace(chr(10), '; ')}")


def _allocation(r: JobRow, spec: NodeSpec) -> object | None:
    """A running job's allocation read back from its placement file's lines (a controller restarted)."""
    from service.decide import DecideAllocation

    kv = dict(ln.split("=", 1) for ln in r.placement or [] if "=" in ln)
    try:
        cpus = parse_cpulist(kv["cpus"])
    except (KeyError, ValueError):
        return None
    if not set(cpus) <= set(spec.cpus):
        return None
    return DecideAllocation(cpus=cpus, memory=_MEMORY.get(kv.get("mempolicy", "default"), "first-touch"))


def _foreign_nodes(jobs: dict[int, SlurmJob], partition: str) -> set[str]:
    """Nodes a job of another partition holds now (its CPUs are its own: nothing of ours starts there)."""
    out: set[str] = set()
    for j in jobs.values():
        if j.partition != partition and j.state in ("RUNNING", "COMPLETING", "CONFIGURING") and j.nodes:
            out.update(expand_nodes(j.nodes))
    return out


def expand_nodes(text: str) -> list[str]:
    """Slurm's node list ('n[1-3,5],m2') as names."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", text):
        m = re.fullmatch(r"(.*)\[(.*)\]", part)
        if not m:
            out.append(part)
            continue
        for rng in m.group(2).split(","):
            a, _, b = rng.partition("-")
            width = len(a)
            for k in range(int(a), int(b or a) + 1):
                out.append(f"{m.group(1)}{k:0{width}d}")
    return out
