"""The tree shows the architecture: imports point one way (folders and env's layers), files and folders stay small,
and the product speaks of itself only. Read from the code's own import statements (every one, in functions too)."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "env", "profiler", "service", "training")
#: What each top-level folder may import of ours.
ALLOWED = {
    "agent": set(),
    "profiler": set(),
    "env": {"profiler"},
    "training": {"agent", "env", "profiler"},
    "service": {"agent", "env", "profiler", "training"},
}
#: env's layers, lowest first: a module may import its own layer and lower ones only.
ENV_LAYERS = ("errors", "node", "plan", "measure", "sim", "calibration", "episode", "planners", "real")
MAX_LINES = 500
MAX_MODULES = 14


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if ".venv" not in p.parts)


def _imports(path: Path) -> list[str]:
    """Every module this file imports (absolute names; ``from X import Y`` counts as X.Y and X)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names]
    return out


def _env_layer(dotted: str) -> int | None:
    parts = dotted.split(".")
    if parts[0] != "env" or len(parts) < 2:
        return None
    return ENV_LAYERS.index(parts[1]) if parts[1] in ENV_LAYERS else None


def test_folders_import_one_way() -> None:
    bad = []
    for path in _modules():
        rel = path.relative_to(ROOT)
        top = rel.parts[0]
        for name in _imports(path):
            other = name.split(".")[0]
            if other in PACKAGES and other != top and other not in ALLOWED[top]:
                bad.append(f"{rel}: imports {name}")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(set(bad)))


def test_env_layers_import_downwards() -> None:
    bad = []
    for path in sorted((ROOT / "env").rglob("*.py")):
        rel = path.relative_to(ROOT)
        own = _env_layer(".".join(rel.with_suffix("").parts))
        if own is None:
            continue
        for name in _imports(path):
            layer = _env_layer(name)
            if layer is not None and layer > own:
                bad.append(f"{rel} ({ENV_LAYERS[own]}): imports {name} ({ENV_LAYERS[layer]})")
    assert not bad, "env layers importing a higher layer:\n" + "\n".join(sorted(set(bad)))


def test_every_env_module_is_in_a_layer() -> None:
    loose = [p.name for p in (ROOT / "env").glob("*.py") if p.name not in ("__init__.py", "errors.py")]
    assert not loose, f"modules outside env's layers: {loose}"


def test_files_and_folders_stay_small() -> None:
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, f"Python files over {MAX_LINES} lines:\n" + "\n".join(long)
    crowded = []
    for pkg in PACKAGES:
        for d in [ROOT / pkg, *[p for p in (ROOT / pkg).rglob("*") if p.is_dir() and p.name != "__pycache__"]]:
            n = len([p for p in d.glob("*.py") if p.name != "__init__.py"])
            if n > MAX_MODULES:
                crowded.append(f"{d.relative_to(ROOT)}: {n} modules")
    assert not crowded, f"folders with more than {MAX_MODULES} flat modules:\n" + "\n".join(crowded)


def test_the_product_speaks_of_itself_only() -> None:
    """Dates, versions and commits; never the development sessions that made it."""
    try:
        out = subprocess.run(["git", "ls-files", "README.md", "docs", *PACKAGES, "native", "bench", "tools", "examples"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    pattern = re.compile(r"\bsessions? [0-9]+", re.IGNORECASE)
    hits = []
    for rel in out:
        p = ROOT / rel
        if p.suffix in (".npz", ".png", ".so") or not p.is_file():
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{rel}:{i}" for i, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
    assert not hits, "lines that speak of development sessions:\n" + "\n".join(hits)
