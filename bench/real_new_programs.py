"""Programs this project never used, on this node from a fresh COSCHED_HOME, the documented steps only (issue 27).
MEASURED (real runs on this node; the 1-minute load is recorded beside every figure).

Steps, each through the command line as a user would run it:

1. ``cosched run calib.json``: the calibration programs' first runs (each alone on the whole node: its profile);
2. ``cosched calibrate --probes 6 --heldout 4 --repeats 3`` (make run's budget; it measures their curves itself);
3. ``cosched run window.json``: the window's programs are new to the node: their first runs are their profiles;
4. ``cosched schedule window.json``: where the plan says its model is stale (``stale_model``), the one command it
   names (``cosched train --node local --refresh``), timed;
5. the window, ``--repeats`` times (default 3), each time by the default policy (``cosched run window.json
   --measure-timeshare``), then ``fifo`` and ``greedy`` (order rotated; their own plans, not replaced by the
   guard: ``plan_window(guard=False)`` run as ``cosched run PLAN.json --measure-timeshare``): throughput vs time
   sharing measured in each run (every job alone, in the same run); and ``packing``, Slurm's node sharing
   (``cosched run window.json --mode continuous --policy packing``), over the median of the same repeat's
   time-sharing runs; the median of the repeats with min and max;
6. until each new program has ``--coruns`` co-runs (default 5) in the calibration data: more default-policy runs
   of the window (not timed);
7. held-out co-runs: for each new program, ``--heldout-pairs`` pairs with a partner, one CPU each, that no run
   measured, run through the node's measuring backend (not kept in the calibration data) ``--heldout-repeats``
   times back to back (default 1) and predicted by the node model as ``cosched run`` would plan with it: the median
   abs error of the new program's own time against the median of its runs (target <= 10 %).

The window's programs are kept aside: nothing in the project was chosen on them (no constant, no size; the
program sizes were set once, from their CPU time, before any measurement). ``--quick``: tiny python programs and
the smallest budgets, to test this script (``tests/runner/test_real_new_programs_bench.py``); its figures mean
nothing. The phases are resumable (``--phase setup`` then ``--phase measure``): the state is in HOME.

    .venv/bin/python bench/real_new_programs.py --home DIR [--phase all|setup|measure] [--repeats 3]
        [--wait-load 1.5 --wait-until HH:MM] [--out docs/figures/real-new-programs.json] [--quick] [--no-refresh]
        [--programs aside|aside2|aside3|aside4|aside5|aside6|aside7] [--search-arm]
    .venv/bin/python bench/real_new_programs.py --home DIR --phase remeasure [--remeasure-repeats 3]
        # a finished run's held-out co-runs measured again: its predictions against the median of the runs
    .venv/bin/python bench/real_new_programs.py --home DIR --phase repredict   # the held-out co-runs of a finished
        # run predicted again by the current code from the same data (measured times, no new run)
        # [--groups-only]: from that data less the continuous runs' records (the ablation of learning from them)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
COSCHED = str(ROOT / ".venv" / "bin" / "cosched")
PY = str(ROOT / ".venv" / "bin" / "python")

#: Programs never used by this project; argv with {text} (a 24 MB text file), {words} (1.5 M lines), {py}.
#: Sizes: about 1-3 CPU-seconds each on this node (user + sys), set once before any measurement.
CALIBRATION = {
    "gzip": ["sh", "-c", "gzip -6 -c {text} > /dev/null"],
    "sort": ["sh", "-c", "sort -S 64M --parallel=2 {words} > /dev/null"],
    "awk-chase": ["mawk", "BEGIN{n=1000000; for(i=0;i<n;i++) nx[i]=(i*7919+13)%n; p=0; "
                          "for(k=0;k<3000000;k++) p=nx[p]; print p}"],
    "np-matmul": ["{py}", "-c", "import numpy as np; a=np.random.default_rng(0).random((1500,1500)); [a@a for _ in range(6)]"],
}
#: Kept aside: the window's programs, new to the node when the window first runs.
ASIDE = {
    "bzip2": ["sh", "-c", "bzip2 -9 -c {text} > /dev/null"],
    "zstd": ["sh", "-c", "zstd -9 -T1 -q -c {text} > /dev/null"],
    "openssl-3des": ["sh", "-c", "cat {text} {text} | openssl enc -des-ede3-cbc -pbkdf2 -pass pass:cosched -out /dev/null"],
    "np-fft": ["{py}", "-c", "import numpy as np; a=np.random.default_rng(0).random(1<<22); [np.fft.fft(a) for _ in range(5)]"],
    "np-gather": ["{py}", "-c", "import numpy as np; g=np.random.default_rng(0); a=g.random(1<<24); "
                               "i=g.integers(0,1<<24,1<<24); [a[i].sum() for _ in range(4)]"],
    "sng-memcpy": ["stress-ng", "--memcpy", "1", "--memcpy-ops", "200", "--quiet"],
}
WINDOW = ["bzip2", "np-gather", "zstd", "sng-memcpy", "openssl-3des", "np-fft", "bzip2", "np-gather"]
#: A second set kept aside (``--programs aside2``), new to the project on 2026-11-26 after ``ASIDE`` had chosen the
#: real-node guard's margin: it chose nothing. Sizes set once from one timing each (1.5-2.3 s CPU), as above.
ASIDE2 = {
    "xz": ["sh", "-c", "head -c 4000000 {text} | xz -6 -T1 -c > /dev/null"],
    "lz4": ["sh", "-c", "cat {text} {text} | lz4 -12 -c > /dev/null"],
    "sqlite": ["sqlite3", ":memory:", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<8000000) "
                                      "SELECT sum(x%7) FROM c;"],
    "sng-qsort": ["stress-ng", "--qsort", "1", "--qsort-ops", "30", "--quiet"],
    "np-sort": ["{py}", "-c", "import numpy as np; a=np.random.default_rng(0).random(1<<23); [np.sort(a) for _ in range(3)]"],
    "bc": ["sh", "-c", "echo 'scale=2200; 4*a(1)' | bc -l > /dev/null"],
}
WINDOW2 = ["xz", "np-sort", "sqlite", "sng-qsort", "lz4", "bc", "xz", "np-sort"]
#: A third set kept aside (``--programs aside3``), new to the project on 2026-11-26 after ``ASIDE2``'s profilings with
#: the packing arm had chosen the real-node rules of that date (a continuous window decided online; rollout decides as
#: packing unless it is predicted better by more than the model's error): it chose nothing. Sizes set once from one
#: timing each (1.5-2.1 s CPU).
ASIDE3 = {
    "perl": ["perl", "-e", "$s=0; for $i (1..45000000) { $s += ($i * 7) % 13 } print $s"],
    "b2sum": ["sh", "-c", "for i in $(seq 56); do b2sum {text}; done > /dev/null"],
    "node": ["node", "-e", "let s=0; for(let i=0;i<500000000;i++) s+=i%7; console.log(s)"],
    "jq": ["jq", "-n", "[range(0;2000000)] | map(. * 3 % 11) | add"],
    "sng-str": ["stress-ng", "--str", "1", "--str-ops", "900000", "--quiet"],
    "np-svd": ["{py}", "-c", "import numpy as np; a=np.random.default_rng(0).random((700,700)); [np.linalg.svd(a) for _ in range(8)]"],
}
WINDOW3 = ["perl", "np-svd", "jq", "b2sum", "node", "sng-str", "perl", "np-svd"]
#: A fourth set kept aside (``--programs aside4``), new to the project on 2026-11-27 after ``ASIDE2``'s profilings G-I
#: had chosen the rule of that date (on a real node the default mode is continuous unless groups are predicted
#: shorter by more than the model's error; continuous runs teach the model) and ``ASIDE3``'s had shown the packing
#: arm ahead of fifo's and greedy's plans: it chose nothing. Sizes set once from one timing each (1.4-2.0 s CPU).
ASIDE4 = {
    "7z": ["sh", "-c", "head -c 3000000 {text} | 7z a -txz -mx=5 -mmt=1 -an -si -so > /dev/null"],
    "sha512": ["sh", "-c", "for i in $(seq 18); do sha512sum {text}; done > /dev/null"],
    "factor": ["sh", "-c", "seq 100000000000000000 100000000000090000 | factor > /dev/null"],
    "sng-matrix": ["stress-ng", "--matrix", "1", "--matrix-ops", "4500", "--quiet"],
    # through cat: GNU grep writing to /dev/null stops at its first match
    "grep-re": ["sh", "-c", "head -c 12000000 {text} | grep -c -E '([a-z])\\1[a-z]*\\1' | cat > /dev/null"],
    "py-dict": ["{py}", "-c", "d = dict()\nfor i in range(9000000): d[i * 7919 % 1000003] = i\nprint(sum(d.values()))"],
}
WINDOW4 = ["7z", "py-dict", "grep-re", "sha512", "factor", "sng-matrix", "7z", "py-dict"]
#: A fifth set kept aside (``--programs aside5``), new to the project on 2026-11-27 after the first-run solo time was
#: made to give way to the co-runs that contradict it (``SOLO_BIAS``; chosen on the errors of profilings L-P): it
#: chose nothing. Sizes set once from one timing each (1.5-2.1 s CPU).
ASIDE5 = {
    "md5": ["sh", "-c", "for i in $(seq 40); do md5sum {text}; done > /dev/null"],
    "tclsh": ["sh", "-c", "echo 'set s 0; for {set i 0} {$i < 3500000} {incr i} {incr s [expr {$i % 7}]}; puts $s' | tclsh"],
    "b64-rev": ["sh", "-c", "head -c 12000000 {text} | base64 | rev | cksum > /dev/null"],
    "sng-crypt": ["stress-ng", "--crypt", "1", "--crypt-ops", "3000", "--quiet"],
    "np-chol": ["{py}", "-c", "import numpy as np; g=np.random.default_rng(0); a=g.random((1200,1200)); "
                              "a=a@a.T+1200*np.eye(1200); [np.linalg.cholesky(a) for _ in range(20)]"],
    "sed-re": ["sh", "-c", "head -c 6000000 {text} | sed -E 's/([a-z]+) ([a-z]+)/\\2 \\1/g' | cksum > /dev/null"],
}
WINDOW5 = ["tclsh", "np-chol", "sed-re", "md5", "b64-rev", "sng-crypt", "tclsh", "np-chol"]
#: A sixth set kept aside (``--programs aside6``), new to the project on 2026-11-27 after aside5's second profiling
#: chose the rule that a program not yet known from co-runs keeps a window out of groups: it chose nothing. Sizes set
#: once from one timing each (1.8-2.2 s CPU).
ASIDE6 = {
    "xxd": ["sh", "-c", "cat {text} {text} | xxd | cksum > /dev/null"],
    "sha1": ["sh", "-c", "for i in $(seq 40); do sha1sum {text}; done > /dev/null"],
    "py-json": ["{py}", "-c", "import json; d=[{'k':i,'v':str(i)*3,'l':[i,i+1]} for i in range(200000)]; "
                              "[json.loads(json.dumps(d)) for _ in range(2)]"],
    "np-qr": ["{py}", "-c", "import numpy as np; a=np.random.default_rng(0).random((1000,1000)); "
                            "[np.linalg.qr(a) for _ in range(5)]"],
    "sng-zlib": ["stress-ng", "--zlib", "1", "--zlib-ops", "120", "--quiet"],
    "sng-tree": ["stress-ng", "--tree", "1", "--tree-ops", "1", "--quiet"],
}
WINDOW6 = ["py-json", "np-qr", "xxd", "sha1", "sng-zlib", "sng-tree", "py-json", "np-qr"]
#: A seventh set kept aside (``--programs aside7``), new to the project on 2026-11-28, after every rule was set: it
#: chose nothing. Sizes set once from one timing each (about 2 s; np-einsum runs 0.45 s: its timing was mostly the
#: interpreter's start).
ASIDE7 = {
    "sng-prime": ["stress-ng", "--cpu", "1", "--cpu-method", "prime", "--cpu-ops", "2700", "--quiet"],
    "sng-lsearch": ["stress-ng", "--lsearch", "1", "--lsearch-ops", "5", "--quiet"],
    "sng-memthrash": ["stress-ng", "--memthrash", "1", "--memthrash-ops", "45", "--quiet"],
    "py-sortstr": ["{py}", "-c", "sorted(str(i * 7919 % 1000003) for i in range(1400000))"],
    "np-einsum": ["{py}", "-c", "import numpy as np; a=np.random.default_rng(0).random((60,60,60)); "
                                "[np.einsum('ijk,jkl->il', a, a) for _ in range(25)]"],
    "tr-wc": ["sh", "-c", "for i in $(seq 28); do tr a-z A-Z < {text} | wc -c; done > /dev/null"],
}
WINDOW7 = ["sng-memthrash", "py-sortstr", "sng-prime", "tr-wc", "np-einsum", "sng-lsearch", "sng-memthrash",
           "py-sortstr"]
#: The window's program sets by ``--programs`` name: (programs, window).
PROGRAM_SETS = {"aside": (ASIDE, WINDOW), "aside2": (ASIDE2, WINDOW2), "aside3": (ASIDE3, WINDOW3),
                "aside4": (ASIDE4, WINDOW4), "aside5": (ASIDE5, WINDOW5), "aside6": (ASIDE6, WINDOW6),
                "aside7": (ASIDE7, WINDOW7)}

_SPIN = "import time\nt=time.perf_counter()\nwhile time.perf_counter()-t<{s}: pass\n"
QUICK_CALIBRATION = {"q-spin": ["{py}", "-c", _SPIN.format(s=0.3)],
                     "q-mem": ["{py}", "-c", "import numpy as np; a=np.ones(1<<22); [a.copy().sum() for _ in range(20)]"]}
QUICK_ASIDE = {"q-new-a": ["{py}", "-c", _SPIN.format(s=0.25)], "q-new-b": ["{py}", "-c", _SPIN.format(s=0.35)]}
QUICK_WINDOW = ["q-new-a", "q-new-b", "q-new-a", "q-new-b"]


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {load1()}] {msg}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.home = Path(a.home).resolve()
        self.home.mkdir(parents=True, exist_ok=True)
        os.environ["COSCHED_HOME"] = str(self.home)
        self.env = {**os.environ, "COSCHED_HOME": str(self.home)}
        self.state_path = self.home / "bench-state.json"
        self.state: dict[str, Any] = json.loads(self.state_path.read_text()) if self.state_path.exists() else {}
        cal, (aside, win) = ((QUICK_CALIBRATION, (QUICK_ASIDE, QUICK_WINDOW)) if a.quick else
                             (CALIBRATION, PROGRAM_SETS[a.programs]))
        data = self.data_files() if not a.quick else {}
        fill = {"py": PY, **data}

        def argv(v: list[str]) -> list[str]:  # {py}, {text}, {words} filled; every other brace kept (awk programs)
            out = []
            for x in v:
                for k, val in fill.items():
                    x = x.replace("{" + k + "}", val)
                out.append(x)
            return out

        self.calibration = {n: argv(v) for n, v in cal.items()}
        self.aside = {n: argv(v) for n, v in aside.items()}
        self.window_names = win

    def save(self) -> None:
        self.state_path.write_text(json.dumps(self.state, indent=1) + "\n")

    def data_files(self) -> dict[str, str]:
        import random

        d = self.home / "data"
        text, words = d / "text.txt", d / "words.txt"
        if not words.exists():
            d.mkdir(parents=True, exist_ok=True)
            r = random.Random(7)
            vocab = ["".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(3, 10))) for _ in range(50_000)]
            with text.open("w") as f:
                n = 0
                while n < 24_000_000:
                    line = " ".join(r.choice(vocab) for _ in range(12)) + "\n"
                    f.write(line)
                    n += len(line)
            with words.open("w") as f:
                for _ in range(1_500_000):
                    f.write(f"{r.choice(vocab)}{r.randint(0, 99_999)}\n")
        return {"text": str(text), "words": str(words)}

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([COSCHED, *args], capture_output=True, text=True, env=self.env, cwd=self.home)
        if check and p.returncode != 0:
            raise SystemExit(f"cosched {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
        return p

    def window_file(self, name: str, programs: dict[str, list[str]], names: list[str]) -> Path:
        path = self.home / f"{name}.json"
        count: dict[str, int] = {}
        jobs = []
        for n in names:
            count[n] = count.get(n, 0) + 1
            jobs.append({"id": f"{n}-{count[n]}", "profile": n, "command": programs[n]})
        path.write_text(json.dumps({"jobs": jobs, "max_concurrency": 2}, indent=1))
        return path

    def run_window(self, path: Path, *extra: str) -> dict:
        p = self.cli("run", str(path), "--json", "--runs", str(self.home / "runs"), *extra)
        return json.loads(p.stdout)

    # -- setup: steps 1-4 ---------------------------------------------------------------------------------------

    def setup(self) -> None:
        a = self.a
        if "first_runs_calibration" not in self.state:
            self.wait_for_quiet()
            say(f"step 1: first runs of the calibration programs ({', '.join(self.calibration)}): cosched run calib.json")
            rep = self.run_window(self.window_file("calib", self.calibration, list(self.calibration)))
            self.state["first_runs_calibration"] = {"alone": [j["id"] for g in rep["groups"] if g["solo_profile"]
                                                              for j in g["jobs"]], "load": load1()}
            self.save()
        if "calibration" not in self.state:
            self.wait_for_quiet()
            budget = ["--probes", "2", "--heldout", "2", "--repeats", "1"] if a.quick else \
                ["--probes", "6", "--heldout", "4", "--repeats", "3"]
            say(f"step 2: cosched calibrate {' '.join(budget)}")
            t = time.monotonic()
            doc = json.loads(self.cli("calibrate", *budget, "--json").stdout)
            self.state["calibration"] = {"heldout": doc["heldout"], "noise_floor": doc.get("noise_floor"),
                                         "jobs": doc["jobs"], "wall_s": round(time.monotonic() - t, 1),
                                         "command": f"cosched calibrate {' '.join(budget)}", "load": load1()}
            self.save()
        window = self.window_file("window", self.aside, self.window_names)
        if "first_runs_window" not in self.state:
            say("step 3: the window's programs are new here: cosched run window.json (their first runs)")
            marks = {n: 0 for n in self.aside}
            rep = self.run_window(window)
            for g in rep["groups"]:
                if g["solo_profile"]:
                    for j in g["jobs"]:
                        marks[j["id"].rsplit("-", 1)[0]] += 1
            self.state["first_runs_window"] = {"alone_runs_per_program": marks, "load": load1(),
                                               "planned": [[j["id"] for j in g["jobs"]] for g in rep["plan"]["groups"]]}
            self.save()
        if "refresh" not in self.state:
            plan = json.loads(self.cli("schedule", str(window), "--mode", "groups", "--json").stdout)
            note = plan.get("stale_model")
            entry: dict[str, Any] = {"stale_model": note, "policy": plan["policy"]}
            if note and not a.no_refresh:
                say(f"step 4: the plan says: {note}")
                t = time.monotonic()
                self.cli("train", "--node", "local", "--refresh")
                entry.update(ran="cosched train --node local --refresh", wall_s=round(time.monotonic() - t, 1), load=load1())
                again = json.loads(self.cli("schedule", str(window), "--mode", "groups", "--json").stdout)
                entry["stale_after"] = again.get("stale_model")
            elif note:
                entry["ran"] = None  # --no-refresh
            self.state["refresh"] = entry
            self.save()

    # -- measure: steps 5-7 -------------------------------------------------------------------------------------

    def wait_for_quiet(self) -> None:
        a = self.a
        if a.wait_load is None:
            return
        deadline = None
        if a.wait_until:
            hh, mm = (int(x) for x in a.wait_until.split(":"))
            now = time.localtime()
            deadline = time.mktime((now.tm_year, now.tm_mon, now.tm_mday, hh, mm, 0, 0, 0, -1))
        while load1() >= a.wait_load and (deadline is None or time.time() < deadline):
            say(f"waiting for a 1-minute load below {a.wait_load}")
            time.sleep(60)

    def measure(self) -> None:
        a = self.a
        window = self.home / "window.json"
        # "search": agent-search's own plan, not replaced by the guard (what the default ran before the real-node
        # guard's margin): the guard's ablation, side by side
        # "packing": Slurm's node sharing, the baseline of every figure (``cosched run window.json --mode continuous
        # --policy packing``: Cmax slots, the next job in order the moment one frees); an online run measures no time
        # sharing of its own, so its throughput is over the median of this repeat's time-sharing runs
        policies = ["default", "fifo", "greedy", "packing"] + (["search"] if a.search_arm else [])
        runs = self.state.setdefault("runs", [])
        for rep in range(a.repeats):
            k = rep % len(policies)
            order = policies[k:] + policies[:k]
            for pol in order:
                if any(r["repeat"] == rep and r["policy"] == pol for r in runs):
                    continue
                self.wait_for_quiet()
                before = load1()
                say(f"step 5: repeat {rep + 1}/{a.repeats}, {pol}")
                if pol == "packing":
                    r = self.run_window(window, "--mode", "continuous", "--policy", "packing")
                    runs.append({"repeat": rep, "policy": pol, "made_by": r["policy"], "requested": None,
                                 "throughput": None, "total_s": r["metrics"]["makespan_s"], "timeshare_s": None,
                                 "timeshare_source": None, "load_before": before, "load_after": load1(),
                                 "max_running": r["max_running"],
                                 "starts": [[j["id"], j["start_s"], j["cpus"]] for j in r["jobs"]], "failed": r["failed"]})
                    self.save()
                    continue
                own = "agent-search" if pol == "search" else pol
                r = self.run_window(window if pol == "default" else self.own_plan(window, own, rep), "--measure-timeshare")
                if "plan" not in r:  # the default's mode was continuous: decided online at every real event
                    reason = next((n for n in r["notes"] if n.startswith("mode ")), None)
                    r["plan"] = {"policy": r["policy"], "mode": "continuous", "mode_reason": reason and reason[5:],
                                 "launches": [{"id": j["id"], "cpus": j["cpus"], "after": []} for j in
                                              sorted(r["jobs"], key=lambda j: j["start_s"])]}
                runs.append({"repeat": rep, "policy": pol, "made_by": r["plan"]["policy"],
                             "requested": r["plan"].get("requested_policy"), "throughput": r["throughput_vs_timeshare"],
                             "total_s": r["total_s"], "timeshare_s": r["timeshare_s"],
                             "timeshare_source": r["timeshare_source"], "load_before": before, "load_after": load1(),
                             "mode": r["plan"].get("mode"), "mode_reason": r["plan"].get("mode_reason"),
                             # a groups plan's groups; a continuous plan's launches (id, CPUs, the jobs it waits for)
                             "groups": [[j["id"] for j in g["jobs"]] for g in r["plan"]["groups"]] if "groups" in r["plan"] else None,
                             "launches": [[x["id"], x["cpus"], x["after"]] for x in r["plan"]["launches"]]
                             if "launches" in r["plan"] else None,
                             "predicted": r["plan"].get("predicted_throughput_vs_timeshare"),
                             "stale_model": r["plan"].get("stale_model"), "failed": r["failed"]})
                self.save()
            ts = [r["timeshare_s"] for r in runs if r["repeat"] == rep and r["timeshare_s"]]
            for r in runs:
                if r["repeat"] == rep and r["policy"] == "packing" and r["throughput"] is None and ts and r["total_s"]:
                    r["timeshare_s"] = statistics.median(ts)
                    r["throughput"] = round(r["timeshare_s"] / r["total_s"], 4)
                    r["timeshare_source"] = (f"measured in this repeat: the median of its {len(ts)} time-sharing runs "
                                             "(each job alone), beside it")
            self.save()
        extra = 0
        while min(self.coruns().values()) < a.coruns and extra < a.max_extra_runs:
            say(f"step 6: co-runs so far {self.coruns()}: one more default-policy run of the window")
            self.run_window(window)
            extra += 1
        self.state["extra_runs"] = self.state.get("extra_runs", 0) + extra
        self.state["coruns"] = self.coruns()
        self.save()
        if "heldout_coruns" not in self.state:
            self.state["heldout_coruns"] = self.heldout()
            self.save()

    def own_plan(self, window: Path, policy: str, rep: int) -> Path:
        """The baseline's own plan (``plan_window(guard=False)``: not replaced by the guard, which ``cosched run
        --policy`` applies), to run as a PLAN.json."""
        from env.plan.models import Window
        from env.sim.nodes import load_node
        from service.planning import plan_window

        plan = plan_window(Window.model_validate_json(window.read_text()), load_node("local"), policy=policy, guard=False)
        path = self.home / f"plan-{policy}-{rep}.json"
        path.write_text(plan.model_dump_json(indent=1))
        return path

    def coruns(self) -> dict[str, int]:
        doc = json.loads(self.cli("jobs", "--backend", "real", "--json").stdout)
        return {j["name"]: j.get("coruns", 0) for j in doc["jobs"] if j["name"] in self.aside}

    def heldout(self) -> dict[str, Any]:
        """Co-runs no run measured, one CPU each: the new program's measured time vs the node model's prediction."""
        from env.calibration.store import CalibrationStore
        from env.node.discover import local_node_id
        from env.real.probes import local_backend

        key = local_node_id()
        predict, learned = pair_predictor()
        first, _ = pair_predictor(solo_from_coruns=False)  # the ablation: every solo time its first run's
        seen = {frozenset(p.job for p in r.record.group) for r in CalibrationStore().runs(key, "run")}
        partners = sorted({*self.calibration, *self.aside})
        backend = local_backend()
        rows = []
        for new in sorted(self.aside):
            chosen = [p for p in partners if p != new and frozenset((new, p)) not in seen][: self.a.heldout_pairs]
            for partner in chosen:
                pred, group = predict(new, partner)
                before = load1()
                runs = []
                for k in range(self.a.heldout_repeats):  # back to back: the median is the truth, one run is noisy
                    say(f"step 7: held-out co-run {new} + {partner}"
                        + (f" ({k + 1}/{self.a.heldout_repeats})" if self.a.heldout_repeats > 1 else ""))
                    runs.append(backend.measure(group).times_s)
                measured = statistics.median(r[0] for r in runs)
                ablation = first(new, partner)[0][0]
                rows.append({"program": new, "partner": partner, "measured_s": measured, "predicted_s": pred[0],
                             "partner_measured_s": statistics.median(r[1] for r in runs), "partner_predicted_s": pred[1],
                             "runs_s": [r[0] for r in runs], "partner_runs_s": [r[1] for r in runs],
                             "error_pct": abs(pred[0] / measured - 1.0) * 100.0,
                             "error_vs_first_run_pct": abs(pred[0] / runs[0][0] - 1.0) * 100.0, "load_before": before,
                             "load_after": load1(), "predicted_first_run_solo_s": ablation,
                             "error_first_run_solo_pct": abs(ablation / measured - 1.0) * 100.0})
        return {"pairs": rows, **error_summary([r["error_pct"] for r in rows]), "repeats": self.a.heldout_repeats,
                "vs_first_run": error_summary([r["error_vs_first_run_pct"] for r in rows]),
                "solo_from_first_run": error_summary([r["error_first_run_solo_pct"] for r in rows]),
                "learned": {lj.name: {"coruns": lj.coruns, "error_pct_on_its_coruns": lj.error_pct,
                                      "scale_factor": lj.scale_factor, "scale_source": lj.scale_source,
                                      "solo_s": lj.solo_s, "first_run_s": lj.first_run_s}
                            for lj in learned if lj.name in self.aside}}

    def remeasure(self) -> dict[str, Any]:
        """The held-out co-runs of a finished run (step 7) measured ``--remeasure-repeats`` times more, the same pairs
        on the same CPUs, none of it kept in the calibration data: the prediction made then (``predicted_s``, before
        any of these runs) against the median of every measurement of the pair, the runs of step 7 included. One run
        of a pair on this shared machine differs from the next by 9-27 %, so an error against one run is partly that
        run's noise; but runs made hours later measure the node as it is then (on this machine the same pairs ran
        5-43 % slower hours later: docs/real-node.md), so this shows the drift as much as the noise. For the target,
        ``--heldout-repeats`` at step 7 is the better measure."""
        from env.real.probes import local_backend

        held = self.state.get("heldout_coruns")
        if not held or not held.get("pairs"):
            raise SystemExit(f"{self.home}: no held-out co-runs to measure again (run --phase all or measure first)")
        from env.sim.nodes import load_node

        cpus = list(load_node("local").cpus)  # the pairs' CPUs as step 7 placed them; no model is needed to run them again
        backend = local_backend()
        rows = []
        self.wait_for_quiet()  # once, as step 7 did: the runs' own load would keep a wait between them going
        for r in held["pairs"]:
            group = pair_group(cpus, r["program"], r["partner"])
            times = list(r.get("runs_s") or [r["measured_s"]])  # step 7's runs (one, before --heldout-repeats)
            partner_times, loads = list(r.get("partner_runs_s") or [r["partner_measured_s"]]), []
            for k in range(self.a.remeasure_repeats):
                loads.append(load1())
                say(f"held-out co-run {r['program']} + {r['partner']} again ({k + 1}/{self.a.remeasure_repeats})")
                m = backend.measure(group)
                times.append(m.times_s[0])
                partner_times.append(m.times_s[1])
            med = statistics.median(times)
            rows.append({"program": r["program"], "partner": r["partner"], "predicted_s": r["predicted_s"],
                         "measured_s": times, "partner_measured_s": partner_times, "load_before": loads,
                         "median_measured_s": med, "spread_pct": (max(times) / min(times) - 1.0) * 100.0,
                         "error_pct": abs(r["predicted_s"] / med - 1.0) * 100.0,
                         "error_first_run_pct": r["error_pct"]})
        out = {"repeats_added": self.a.remeasure_repeats, "pairs": rows,
               **error_summary([x["error_pct"] for x in rows]),
               "as_run": {k: held[k] for k in ("median_abs_error_pct", "p90_abs_error_pct", "n")},
               "spread_pct_median": statistics.median(x["spread_pct"] for x in rows)}
        self.state["heldout_remeasured"] = out
        self.save()
        return out

    def repredict(self) -> dict[str, Any]:
        """The held-out co-runs of a finished run (step 7) predicted again by the node model as the current code
        builds it from the same calibration data: their measured times against the new predictions.
        ``--groups-only``: from that data less the continuous runs' records (``start_s``), in a copy of HOME, as the
        model learned before continuous runs taught it (the ablation of that learning)."""
        held = self.state.get("heldout_coruns")
        if not held or not held.get("pairs"):
            raise SystemExit(f"{self.home}: no held-out co-runs to predict again (run --phase all or measure first)")
        if self.a.groups_only:
            import shutil
            import sqlite3
            import tempfile

            copy = Path(tempfile.mkdtemp(prefix="rnp-groups-only-"))
            for f in ("calibration.sqlite", "profiles.sqlite", "node-models"):
                (shutil.copytree if (self.home / f).is_dir() else shutil.copy)(self.home / f, copy / f)
            with sqlite3.connect(copy / "calibration.sqlite") as conn:
                gone = conn.execute("DELETE FROM runs WHERE document LIKE '%\"start_s\"%'").rowcount
            say(f"--groups-only: {gone} records of continuous runs left out (a copy of HOME: {copy})")
            os.environ["COSCHED_HOME"] = str(copy)
        predict, _ = pair_predictor()
        first, _ = pair_predictor(solo_from_coruns=False)
        errs = [abs(predict(r["program"], r["partner"])[0][0] / r["measured_s"] - 1.0) * 100.0 for r in held["pairs"]]
        errs_first = [abs(first(r["program"], r["partner"])[0][0] / r["measured_s"] - 1.0) * 100.0
                      for r in held["pairs"]]
        return {"then": {k: held[k] for k in ("median_abs_error_pct", "p90_abs_error_pct", "n")},
                "now": error_summary(errs), "now_solo_from_first_run": error_summary(errs_first)}


def pair_group(cpus: list[int], new: str, partner: str) -> list:  # noqa: ANN201 - [Placement]
    """A held-out pair as step 7 runs it: the new program on the node's first CPU, its partner on the second."""
    from env.measure.probing import Placement

    return [Placement(new, (cpus[0],)), Placement(partner, (cpus[1],))]


def pair_predictor(solo_from_coruns: bool = True):  # noqa: ANN201 - (program, partner) -> (times, group); learned
    """The node model's prediction of a pair on one CPU each, as ``cosched run`` would plan with it.
    ``solo_from_coruns`` False: the ablation, each learned program's solo time its first run's (``SOLO_BIAS``)."""
    from env.calibration import learned as lp
    from env.measure.probing import Placement
    from env.node.discover import local_node_id
    from env.sim.probes import GroupModel

    shipped, keep = lp.SOLO_BIAS, lp.write_learned
    if not solo_from_coruns:  # the ablation's fit is not what the node's commands should read back
        lp.SOLO_BIAS, lp.write_learned = math.inf, lambda *a: None
    lp._planning_model.cache_clear()
    try:
        got = lp.planning_model(local_node_id())
    finally:
        lp.SOLO_BIAS, lp.write_learned = shipped, keep
        lp._planning_model.cache_clear()
    assert got is not None, "no node model"
    _, model, learned = got
    gm = GroupModel(model.node, model.params, model.job_params(), model.probe)
    cpus = list(model.node.cpus)

    def predict(new: str, partner: str) -> tuple[list[float], list[Placement]]:
        group = pair_group(cpus, new, partner)
        return gm.times(group)[0], group

    return predict, learned


def error_summary(errs: list[float]) -> dict[str, Any]:
    errs = sorted(errs)
    return {"median_abs_error_pct": statistics.median(errs) if errs else None,
            "p90_abs_error_pct": errs[min(len(errs) - 1, int(0.9 * len(errs)))] if errs else None, "n": len(errs)}


def summary(state: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pol in ("default", "fifo", "greedy", "packing", "search"):
        rs = [r for r in state.get("runs", []) if r["policy"] == pol and r["throughput"] is not None]
        if rs:
            ts = [r["throughput"] for r in rs]
            out[pol] = {"median": statistics.median(ts), "min": min(ts), "max": max(ts), "n": len(ts),
                        "made_by": sorted({r["made_by"] for r in rs}),
                        "load": [r["load_before"] for r in rs]}
    by = {(r["repeat"], r["policy"]): r["throughput"] for r in state.get("runs", []) if r["throughput"] is not None}
    side = [by[(k, "default")] / by[(k, "packing")] for k, p in by if p == "packing" and (k, "default") in by]
    if side:  # the ratio the brief asks of every figure, measured side by side in each repeat
        out["default_vs_packing"] = {"median": statistics.median(side), "min": min(side), "max": max(side), "n": len(side)}
    # The same jobs in the same repeat: packing's makespan over the default's. The throughput ratio above divides by
    # two time-sharing measurements (the default's own run's, the repeat's median for packing), whose noise it carries.
    mk = {(r["repeat"], r["policy"]): r["total_s"] for r in state.get("runs", [])
          if r.get("total_s") and r["throughput"] is not None}
    side = [mk[(k, "packing")] / mk[(k, "default")] for k, p in mk if p == "packing" and (k, "default") in mk]
    if side:
        out["default_vs_packing_makespan"] = {"median": statistics.median(side), "min": min(side), "max": max(side),
                                              "n": len(side)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True, help="a fresh COSCHED_HOME (the state of the phases is kept in it)")
    ap.add_argument("--phase", choices=("all", "setup", "measure", "repredict", "remeasure"), default="all",
                    help="repredict: a finished run's held-out co-runs predicted again by the current code; "
                    "remeasure: measured again (--remeasure-repeats), the prediction made then against their median")
    ap.add_argument("--remeasure-repeats", type=int, default=3, help="with --phase remeasure: more runs of each pair")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--coruns", type=int, default=5, help="co-runs of each new program before the held-out check")
    ap.add_argument("--max-extra-runs", type=int, default=4, help="default-policy runs at most to reach --coruns")
    ap.add_argument("--heldout-pairs", type=int, default=2, help="held-out co-runs per new program")
    ap.add_argument("--heldout-repeats", type=int, default=1,
                    help="runs of each held-out co-run, back to back: its median is compared with the prediction")
    ap.add_argument("--wait-load", type=float, default=None, help="before each measuring step, wait for a 1-min load below")
    ap.add_argument("--wait-until", default=None, metavar="HH:MM", help="wait for the load until then at most")
    ap.add_argument("--no-refresh", action="store_true", help="do not run the refresh command even if a plan asks")
    ap.add_argument("--programs", choices=sorted(PROGRAM_SETS), default="aside",
                    help="the window's programs: ASIDE (chose the real-node guard's margin), ASIDE2 (its profilings "
                    "with the packing arm chose the real-node rules of 2026-11-26 and of 2026-11-27), ASIDE3 (checked "
                    "the rules of 2026-11-26), ASIDE4 (chose nothing); ASIDE5-ASIDE7: what each chose is beside its "
                    "definition")
    ap.add_argument("--search-arm", action="store_true",
                    help="also run agent-search's own plan (not replaced by the guard) in each repeat")
    ap.add_argument("--quick", action="store_true", help="tiny programs and budgets: to test this script")
    ap.add_argument("--groups-only", action="store_true",
                    help="with --phase repredict: leave the continuous runs' records out of what the model learns from")
    ap.add_argument("--out", default=None, metavar="FILE.json")
    a = ap.parse_args()
    if min(a.heldout_repeats, a.remeasure_repeats) < 1 or a.heldout_pairs < 0:
        ap.error(f"--heldout-repeats {a.heldout_repeats}, --remeasure-repeats {a.remeasure_repeats} (1 or more each) "
                 f"/ --heldout-pairs {a.heldout_pairs} (0 or more)")
    b = Bench(a)
    if a.phase == "remeasure":
        r = b.remeasure()
        if a.out:
            Path(a.out).write_text(json.dumps(r, indent=1) + "\n")
        t = r["as_run"]
        print(f"held-out co-runs (n {r['n']}): median abs error {t['median_abs_error_pct']:.1f} % against step 7's "
              f"runs, {r['median_abs_error_pct']:.1f} % against the median of those and {r['repeats_added']} more (p90 "
              f"{t['p90_abs_error_pct']:.1f} -> {r['p90_abs_error_pct']:.1f} %; a pair's runs spread "
              f"{r['spread_pct_median']:.1f} % by median) measured; the predictions made before any of these runs")
        return 0
    if a.phase == "repredict":
        r = b.repredict()
        if a.out:
            Path(a.out).write_text(json.dumps(r, indent=1) + "\n")
        t, n = r["then"], r["now"]
        print(f"held-out co-runs (n {n['n']}): median abs error {t['median_abs_error_pct']:.1f} % as run, "
              f"{n['median_abs_error_pct']:.1f} % predicted again (p90 {t['p90_abs_error_pct']:.1f} -> "
              f"{n['p90_abs_error_pct']:.1f} %); measured times, the current code's predictions")
        return 0
    if a.phase in ("all", "setup"):
        b.setup()
    if a.phase in ("all", "measure"):
        b.measure()
    doc = {"what": "programs never used by the project on this node, from a fresh COSCHED_HOME (issue 27)",
           "measured": True, "quick": a.quick, "command": "python bench/real_new_programs.py " + " ".join(sys.argv[1:]),
           "calibration_programs": b.calibration, "window_programs_kept_aside": b.aside, "window": b.window_names,
           "summary": summary(b.state), **b.state}
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    s = doc["summary"]
    for pol, v in s.items():
        if pol in ("default_vs_packing", "default_vs_packing_makespan"):
            what = "throughput" if pol == "default_vs_packing" else "packing's makespan / the default's"
            print(f"default / packing ({what}), side by side in each repeat: median {v['median']:.3f} "
                  f"(min {v['min']:.3f}, max {v['max']:.3f}, n {v['n']}) measured")
            continue
        print(f"{pol}: median {v['median']:.3f} x time sharing (min {v['min']:.3f}, max {v['max']:.3f}, n {v['n']}; "
              f"made by {', '.join(v['made_by'])}; load {v['load']}) measured")
    h = b.state.get("heldout_coruns")
    if h and h["n"]:
        print(f"new programs after >= {a.coruns} co-runs ({b.state.get('coruns')}): held-out co-runs median abs error "
              f"{h['median_abs_error_pct']:.1f} % (p90 {h['p90_abs_error_pct']:.1f} %, n {h['n']}) measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
