"""The built SPANK plugin as Slurm loads it: slurmstepd/srun/sbatch look its hooks up by name, so a hook
that is not exported (the objects are built with -fvisibility=hidden) is silently never called. The hooks'
logic is tested in native/tests/test_spank_glue.c; Slurm's daemons run it in tests/slurm."""
import shutil
import subprocess
from pathlib import Path

import pytest

from pinrt_helpers import BUILD, require_build

PLUGIN = BUILD / "cosched_spank.so"
HOOKS = {"slurm_spank_init", "slurm_spank_init_post_opt", "slurm_spank_task_init_privileged",
         "slurm_spank_task_init", "slurm_spank_task_exit", "slurm_spank_exit"}
# What a SPANK plugin may take from its host (slurmstepd, srun, sbatch) besides libc.
HOST = {"slurm_error", "slurm_info", "spank_context", "spank_get_item", "spank_getenv", "spank_option_register",
        "spank_remote", "spank_setenv"}


def dynamic_symbols(lib: Path, *flags: str) -> set[str]:
    out = subprocess.run(["nm", "-D", *flags, str(lib)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def plugin() -> Path:
    require_build()
    if not Path("/usr/include/slurm/spank.h").exists():
        pytest.skip("libslurm-dev is not installed (tools/setup-apt.sh installs it): no cosched_spank.so")
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is missing")
    assert PLUGIN.exists(), "make -C native did not build cosched_spank.so although spank.h is there"
    return PLUGIN


def test_hooks_and_plugin_identity_exported(plugin):
    defined = dynamic_symbols(plugin, "--defined-only")
    assert HOOKS | {"plugin_name", "plugin_type", "plugin_version", "spank_plugin_version"} <= defined
    # nothing else of ours leaks into the host's namespace (src/spank/*.c, src/runtime/config.c, src/common/*.c stay hidden)
    assert not {s for s in defined if s.startswith(("cp_", "pr_", "cm_"))}


def test_only_host_and_libc_symbols_needed(plugin):
    undefined = dynamic_symbols(plugin, "--undefined-only")
    ours = {s for s in undefined if s.startswith(("slurm_", "spank_"))}
    assert ours <= HOST, ours - HOST
    assert "slurm_error" in ours and "spank_setenv" in ours
