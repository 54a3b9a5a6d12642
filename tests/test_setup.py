"""``make setup`` on a fresh Debian/Ubuntu machine: which packages it names, what it says and
does when some are missing, and README's step-by-step commands matching the Makefile.

A minimal Debian image (``debian:12``, ``ubuntu:24.04``) has neither a compiler nor
``python3-venv``, so these tests check the Makefile names every package the build and a mount
need. ``make system-packages`` runs for real, with stand-ins for ``dpkg-query``, ``id``,
``apt-get`` and ``sudo`` on its ``PATH``: a machine that lacks packages without being one (and
without the network).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = ROOT / "Makefile"
README = ROOT / "README.md"

# What a minimal Debian lacks to build and run memfs: `python3 -m venv` needs python3-venv; pip
# compiles pyfuse3 (no wheel) with a C compiler and libc headers, Python's headers, libfuse3's
# headers found by pkg-config; a mount needs fusermount3.
NEEDED_TO_BUILD = {"python3-venv", "python3-dev", "gcc", "libc6-dev", "pkg-config", "libfuse3-dev"}
NEEDED_TO_MOUNT = {"fuse3"}


def make_variable(name: str) -> str:
    """The value of a simple ``NAME := value`` line of the Makefile (continuations joined)."""
    text = MAKEFILE.read_text().replace("\\\n", " ")
    match = re.search(rf"^{name} := (.*)$", text, re.MULTILINE)
    assert match, f"{name} is not set in the Makefile"
    return " ".join(match.group(1).split())


def make_list(name: str) -> list[str]:
    return make_variable(name).split()


def test_the_makefile_names_every_package_a_minimal_debian_lacks() -> None:
    build, mount = set(make_list("APT_BUILD")), set(make_list("APT_MOUNT"))
    assert build >= NEEDED_TO_BUILD, NEEDED_TO_BUILD - build
    assert mount >= NEEDED_TO_MOUNT
    every = make_list("APT_BUILD") + make_list("APT_MOUNT") + make_list("APT_TEST")
    assert make_variable("APT_PACKAGES") == "$(APT_BUILD) $(APT_MOUNT) $(APT_TEST)"
    assert len(every) == len(set(every)), "a package named twice"


def readme_block(heading: str) -> str:
    """The first ```sh block after ``heading`` in README."""
    text = README.read_text()
    start = text.index(heading)
    block = re.search(r"```sh\n(.*?)```", text[start:], re.DOTALL)
    assert block, f"no sh block after {heading!r}"
    return block.group(1)


def apt_lines(block: str) -> list[list[str]]:
    """The packages of each ``sudo apt-get install`` line of a README block."""
    found = []
    for line in block.splitlines():
        command = line.split("#", 1)[0].split()
        if command[:3] == ["sudo", "apt-get", "install"]:
            found.append([word for word in command[3:] if not word.startswith("-")])
    return found


def test_readme_step_by_step_runs_what_make_setup_runs() -> None:
    block = readme_block("### Set-up, step by step")
    assert apt_lines(block) == [
        ["make"],
        make_list("APT_BUILD") + make_list("APT_MOUNT"),
        make_list("APT_TEST"),
    ]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert "python3 -m venv .venv" in commands
    assert f".venv/bin/pip install -e '.[{make_variable('EXTRAS')}]'" in commands


def test_readme_installs_elsewhere_into_a_venv_or_with_pipx() -> None:
    """Debian 12 refuses a bare ``pip install`` outside a venv (PEP 668, externally managed)."""
    block = readme_block("## Using memfs")
    installs = [line.split("#", 1)[0].strip() for line in block.splitlines() if " install " in line]
    assert installs, "no install line"
    for line in installs:
        assert line.startswith(("~/.memfs-venv/bin/pip install ", "pipx install ")), line
    assert "python3 -m venv ~/.memfs-venv" in block


# ---- `make system-packages` on a machine that lacks packages ----------------------------------


def stand_ins(tmp_path: Path, *, installed: Iterable[str], uid: int, sudo: bool) -> Path:
    """A ``bin`` directory with the tools the recipe calls: dpkg-query answering from
    ``installed``, ``id -u`` printing ``uid``, apt-get (and sudo, if ``sudo``) writing their
    arguments to ``calls``; grep is the real one. Nothing else is on the PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    grep = shutil.which("grep")
    assert grep
    (bin_dir / "grep").symlink_to(grep)
    scripts = {
        "dpkg-query": (
            f'pkg="${{@: -1}}"\ncase " {" ".join(installed)} " in\n'
            '  *" $pkg "*) printf "install ok installed" ;;\n'
            '  *) echo "dpkg-query: no packages found matching $pkg" >&2; exit 1 ;;\nesac\n'
        ),
        "id": f"echo {uid}\n",
        "apt-get": f'echo "apt-get $*" >> {calls}\n',
    }
    if sudo:
        scripts["sudo"] = f'echo "sudo $1" >> {calls}\nexec "$@"\n'
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)
    return bin_dir


def run_system_packages(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make")
    assert make
    return subprocess.run(
        [make, "--no-print-directory", "-C", str(ROOT), "system-packages"],
        env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/root")},
        capture_output=True,
        text=True,
        timeout=30,
    )


def calls_of(tmp_path: Path) -> list[str]:
    calls = tmp_path / "calls"
    return calls.read_text().splitlines() if calls.exists() else []


def every_package() -> list[str]:
    return make_list("APT_BUILD") + make_list("APT_MOUNT") + make_list("APT_TEST")


def test_nothing_missing_is_silent_and_installs_nothing(tmp_path: Path) -> None:
    bin_dir = stand_ins(tmp_path, installed=every_package(), uid=0, sudo=False)
    result = run_system_packages(bin_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert calls_of(tmp_path) == []


def test_a_fresh_machine_as_root_gets_every_package_named_then_installed(tmp_path: Path) -> None:
    bin_dir = stand_ins(tmp_path, installed=[], uid=0, sudo=False)
    result = run_system_packages(bin_dir)
    assert result.returncode == 0, result.stderr
    build = " ".join(make_list("APT_BUILD"))
    assert f"to build memfs (a venv, pyfuse3 compiled): {build}\n" in result.stdout
    assert "to mount: fuse3\n" in result.stdout
    assert " ".join(make_list("APT_TEST")) in result.stdout
    assert calls_of(tmp_path) == [
        "apt-get update -qq",
        "apt-get install -y -qq " + " ".join(every_package()),
    ]


def test_an_ordinary_user_with_sudo_installs_only_what_is_missing(tmp_path: Path) -> None:
    missing = ["python3-venv", "gcc"]
    present = [p for p in every_package() if p not in missing]
    bin_dir = stand_ins(tmp_path, installed=present, uid=1000, sudo=True)
    result = run_system_packages(bin_dir)
    assert result.returncode == 0, result.stderr
    assert "to build memfs (a venv, pyfuse3 compiled): python3-venv gcc\n" in result.stdout
    assert "to mount" not in result.stdout
    assert calls_of(tmp_path) == [
        "sudo apt-get",
        "apt-get update -qq",
        "sudo apt-get",
        "apt-get install -y -qq python3-venv gcc",
    ]


@pytest.mark.parametrize(
    ("missing", "fails"),
    [(["python3-dev", "chromium"], True), (["emacs-nox", "chromium"], False)],
    ids=["build-package-missing", "only-test-tools-missing"],
)
def test_without_root_or_sudo_it_names_the_command_for_an_administrator(
    tmp_path: Path, missing: list[str], fails: bool
) -> None:
    """Build or mount packages missing: stop (pip would fail later, less clearly). Only test
    tools missing: go on (``make demo`` needs none of them), saying what ``make test`` needs."""
    present = [p for p in every_package() if p not in missing]
    bin_dir = stand_ins(tmp_path, installed=present, uid=1000, sudo=False)
    result = run_system_packages(bin_dir)
    assert (result.returncode != 0) == fails, result
    assert "not root and no sudo" in result.stdout
    assert f"  apt-get install {' '.join(missing)}\n" in result.stdout
    assert calls_of(tmp_path) == []
