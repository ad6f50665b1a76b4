"""The fresh-machine guard (scripts/check_build_deps.sh): the Debian packages the build used must
all be installed by the set-up or be part of a minimal system."""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("TRIPY_BUILD_DIR", "build"))
SETUP = os.path.join(ROOT, "scripts", "install_deps.sh")


def _setup_packages():
    """The pkgs=( ... ) list of scripts/install_deps.sh, as bash reads it."""
    script = f"source <(sed -n '/^pkgs=(/,/)/p' {SETUP}); printf '%s\\n' \"${{pkgs[@]}}\""
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()


def _setup_ran_here():
    """Whether scripts/install_deps.sh could have set up this machine: every listed package is
    installed (a machine whose build uses carried packages, like the GPU machine's, is not)."""
    if shutil.which("dpkg-query") is None:
        return False
    out = subprocess.run(["dpkg-query", "-W", "-f=${Status}\n", *_setup_packages()], capture_output=True, text=True)
    return out.returncode == 0 and all(line.endswith("installed") for line in out.stdout.splitlines())


pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")) or not _setup_ran_here(),
    reason="needs the build tree of a machine that the set-up installed",
)


def _guard(*package_list):
    return subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "check_build_deps.sh"), BUILD, *map(str, package_list)],
        capture_output=True, text=True, timeout=120,
    )


def test_the_setup_installs_every_package_the_build_uses():
    out = _guard()
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("package", ["ocl-icd-opencl-dev", "libdnnl-dev", "nlohmann-json3-dev"])
def test_a_package_left_out_of_the_setup_is_named(tmp_path, package):
    # oneDNN's CMake config needs OpenCL's development files, which libdnnl-dev only Recommends:
    # leaving ocl-icd-opencl-dev out is the defect the guard was written for.
    kept = [name for name in _setup_packages() if name != package]
    assert len(kept) == len(_setup_packages()) - 1
    (tmp_path / "packages.txt").write_text("\n".join(kept) + "\n")
    out = _guard(tmp_path / "packages.txt")
    assert out.returncode == 1
    assert f"  {package} (for /usr/" in out.stdout
