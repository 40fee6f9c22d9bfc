"""The one table of runtime options (native/src/runtime/config.c): the README's table is
its markdown, and pinrt-run's flags and help come from it."""
import re
import subprocess

from pinrt_helpers import ROOT, RUN, require_build

README = ROOT / "native" / "README.md"


def run_launcher(*args: str) -> subprocess.CompletedProcess:
    require_build()
    return subprocess.run([str(RUN), *args], capture_output=True, text=True, timeout=30)


def test_readme_table_is_the_generated_one():
    text = README.read_text()
    m = re.search(r"<!-- options table:[^\n]*-->\n(.*?)<!-- end of options table -->", text, re.S)
    assert m, "README lost its options table markers"
    r = run_launcher("--help-markdown")
    assert r.returncode == 0
    assert m.group(1) == r.stdout, "README's table is stale: regenerate it with native/build/pinrt-run --help-markdown"


def test_help_lists_every_variable_with_default_once():
    md = run_launcher("--help-markdown").stdout
    help_text = run_launcher("--help").stdout
    rows = [line for line in md.splitlines()[2:] if line.startswith("| `PINRT_")]
    assert len(rows) >= 30
    for row in rows:
        var, flag, default = [cell.strip(" `") for cell in row.split(" | ")[:3]]
        var = var.lstrip("| `")
        line = next(h for h in help_text.splitlines() if f" {var} " in h)
        assert line.lstrip().startswith(flag) and f"(default {default};" in line


def test_each_flag_sets_its_variable():
    r = run_launcher("--period", "0.5", "--seed=7", "--lib", "/nonexistent", "--", "sh", "-c",
                     'echo "$PINRT_PERIOD $PINRT_SEED"')
    assert r.returncode == 0 and r.stdout == "0.5 7\n"
    assert "running without the runtime" in r.stderr


def test_unknown_flag_one_line():
    r = run_launcher("--perod", "1", "--", "true")
    assert r.returncode == 2 and r.stderr == "pinrt-run: unknown option --perod (see --help)\n"
