"""Re-partitioning at an event (a continuous plan's ``changes``) writes the schemata it says, line by line, into the
running job's resctrl group. This machine has no resctrl: the substitute is a fake resctrl tree (a forced RDT
topology from the fake sysroot) whose group's ``schemata`` is a FIFO read by a thread, so every write the kernel would
see is recorded in order (a regular file would keep only the last line; two quick writes may arrive in one read)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from env.node.discover import discover
from env.node.resctrl import schemata
from env.plan.launch import enforcement
from env.plan.models import L3Alloc
from env.plan.stream_plan import Change, ContinuousPlan
from env.real.launches import apply_change


class _FakeSchemata:
    """A resctrl group directory whose ``schemata`` records each write, in order. The FIFO is held open for reading
    and writing throughout (Linux allows O_RDWR on a FIFO), so a writer's open never waits and no write is lost between
    two writers: a FIFO that its last reader closes drops what is in it, which lost the second line under load."""

    _END = b"\0"

    def __init__(self, group: Path) -> None:
        group.mkdir()
        self.path = group / "schemata"
        os.mkfifo(self.path)
        self._fd = os.open(self.path, os.O_RDWR)
        self.writes: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            chunk = os.read(self._fd, 65536)
            end = chunk.endswith(self._END)
            if chunk.rstrip(self._END):
                self.writes.append(chunk.rstrip(self._END).decode())
            if end:
                return

    def close(self) -> None:
        os.write(self._fd, self._END)  # after every write of the change: the reader's last round
        self._thread.join(timeout=5)
        os.close(self._fd)


def _plan(node, enf) -> ContinuousPlan:  # noqa: ANN001 - NodeSpec, Enforcement
    # only the enforcement is read when a change is applied: the rest of a plan is left out on purpose
    return ContinuousPlan.model_construct(enforcement=enf)


def test_a_change_writes_the_new_ways_and_caps_as_resctrl_schemata(tmp_path: Path, fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(), which=which_all)
    enf = enforcement(node, "resctrl")
    assert enf.method == "resctrl" and enf.l3 and enf.mem_bw
    fake = _FakeSchemata(tmp_path / "cosched-g0-a")
    try:
        ch = Change(at_end_of="b", job="a", l3={"0": L3Alloc(ways=2, mask="0x3"), "1": L3Alloc(ways=4, mask="0xf0")},
                    mem_bw_percent={"0": 50, "1": 30})
        applied, why = apply_change(_plan(node, enf), node, ch, str(fake.path.parent))
    finally:
        fake.close()
    assert applied and why is None
    want = schemata(node, {0: 0x3, 1: 0xF0}, {0: 50, 1: 30}).splitlines()
    assert want[0] == "L3:0=3;1=f0" and want[1].startswith("MB:")
    assert "".join(fake.writes) == "".join(line + "\n" for line in want)  # every line, in order


def test_a_change_where_ways_and_caps_are_not_enforced_is_not_applied_and_says_why(tmp_path: Path) -> None:
    from env.sim.nodes import load_node

    node = load_node("sim:reference")  # CAT and MBA are modelled there, but nothing is launched: nothing enforces them
    ch = Change(at_end_of="b", job="a", l3={"0": L3Alloc(ways=2, mask="0x3")})
    applied, why = apply_change(_plan(node, enforcement(node, "resctrl")), node, ch, str(tmp_path / "g"))
    assert not applied and why is not None and why.startswith("ways and bandwidth caps are not enforced on this node")
    assert not (tmp_path / "g").exists()
