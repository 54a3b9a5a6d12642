"""``memfs completion bash|zsh``: scripts generated from the parser, loaded by the real shells.

bash: the script is sourced, registers a completion for ``memfs``, and its function, called as
bash calls it (``COMP_WORDS``, ``COMP_CWORD``), completes commands, actions, options, choices
and directories. zsh: the script parses and ``compinit`` registers it (skipped without zsh).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import shtab

from memfs.commands.parsing import DIRECTORY, FILE


def script(shell: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "memfs", "completion", shell],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stderr == ""
    return proc.stdout


# Sources the script, then prints what its function offers for each line of words ("" at the
# end: completing a new word).
BASH_COMPLETE = """
source "$1"; shift
complete -p memfs
for line in "$@"; do
    read -r -a COMP_WORDS <<< "$line"
    [[ "$line" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMP_LINE="$line"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
    "$FUNCTION" memfs "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    echo "${COMPREPLY[*]}"
done
"""


def bash_completions(tmp_path: Path, *lines: str) -> list[str]:
    path = tmp_path / "memfs.bash"
    path.write_text(script("bash"))
    proc = subprocess.run(
        ["bash", "-c", BASH_COMPLETE, "bash", str(path), *lines],
        env={"PATH": "/usr/bin:/bin", "FUNCTION": "_shtab_memfs"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    registered, *answers = proc.stdout.splitlines()
    assert registered.endswith("-F _shtab_memfs memfs")
    return answers


def test_bash_loads_the_script_and_completes(tmp_path: Path) -> None:
    (tmp_path / "mnt").mkdir()
    (tmp_path / "mnt-file").write_text("")
    answers = bash_completions(
        tmp_path,
        "memfs ",
        "memfs m",
        "memfs stores ",
        "memfs mount --gr",
        "memfs mount --change-feed ",
        "memfs completion ",
        "memfs session st",
        "memfs umount mn",
    )
    assert answers == [
        "server stores memories search export import mount umount status sync session mcp "
        "completion",
        "memories mount mcp",
        "create list ls show update archive delete",  # `ls`: an alias of list
        "--grace",
        "auto poll",
        "bash zsh",
        "stop status",
        "mnt",  # a directory, not the file beside it
    ]


def test_zsh_script_is_generated_and_loads(tmp_path: Path) -> None:
    text = script("zsh")
    assert text.startswith("#compdef memfs")
    assert "completion" in text and "--change-feed" in text
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed: the script was generated, not loaded")
    (tmp_path / "_memfs").write_text(text)
    proc = subprocess.run(
        [
            "zsh", "-fc",
            f"zsh -n {tmp_path}/_memfs && fpath=({tmp_path} $fpath) && "
            "autoload -Uz compinit && compinit -u -D && print -r -- ${_comps[memfs]}",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "_memfs"


def test_path_hints_are_shtabs_own() -> None:
    """``memfs.commands.parsing`` spells them out to build the parser without importing shtab."""
    for shell in ("bash", "zsh"):
        assert FILE[shell] == shtab.FILE[shell]
        assert DIRECTORY[shell] == shtab.DIRECTORY[shell]
