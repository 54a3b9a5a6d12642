"""Session config parsing, store and root checks, the prompt and the state file (no server)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memfs.contract.models import MemoryStore
from memfs.mount.owner import Owner
from memfs.session.config import (
    MAX_INSTRUCTIONS,
    Attachment,
    SessionError,
    load_config,
    parse_config,
)
from memfs.session.plan import MountPlan, plan_mounts
from memfs.session.prompt import render_prompt
from memfs.session.state import SessionState, check_session_id, new_session_id, state_path
from memfs.session.stores import databricks_store

NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
ROOT = Path("/mnt/memory")


def store(
    store_id: str, name: str, *, description: str = "", archived: bool = False
) -> MemoryStore:
    return MemoryStore(
        id=store_id,
        name=name,
        description=description,
        metadata={},
        created_at=NOW,
        updated_at=NOW,
        archived_at=NOW if archived else None,
    )


def resource(store_id: str, **extra: object) -> dict[str, object]:
    return {"type": "memory_store", "memory_store_id": store_id, **extra}


def problems_of(text: str) -> list[str]:
    with pytest.raises(SessionError) as info:
        parse_config(text)
    return info.value.problems


def test_a_list_and_an_object_with_resources_are_both_accepted() -> None:
    listed = parse_config(json.dumps([resource("memstore_a", access="read_only")]))
    wrapped = parse_config(json.dumps({"resources": [resource("memstore_a", access="read_only")]}))
    assert listed.attachments == wrapped.attachments
    assert listed.attachments[0].read_only


def test_defaults_read_write_and_empty_instructions() -> None:
    (attachment,) = parse_config(json.dumps([resource("memstore_a")])).attachments
    assert attachment == Attachment("memstore_a", "read_write", "", 0)


def test_other_resource_types_are_skipped_with_a_note() -> None:
    config = parse_config(
        json.dumps([{"type": "file", "file_id": "file_1"}, resource("memstore_a")])
    )
    assert [a.memory_store_id for a in config.attachments] == ["memstore_a"]
    assert config.notes == ["resources[0] is a 'file' resource; memfs mounts only memory stores"]


def test_output_only_fields_from_the_platform_are_accepted() -> None:
    item = resource("memstore_a", name="Old name", description="d", mount_path="/mnt/memory/x")
    assert parse_config(json.dumps([item])).attachments[0].memory_store_id == "memstore_a"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[", "is not valid JSON: Expecting value at line 1 column 2"),
        ('{"stores": []}', "expected a list of resources or an object with 'resources'"),
        ('{"resources": 3}', "'resources' must be a list, not a number"),
        ("[]", "attaches no memory store"),
        ("[7]", "resources[0] must be an object, not a number"),
        ('[{"memory_store_id": "memstore_a"}]', "resources[0] has no 'type'"),
        ('[{"type": "memory_store"}]', "resources[0] needs a 'memory_store_id' string"),
        (
            json.dumps([resource("memstore_a", access="rw")]),
            "resources[0]: access must be 'read_write' or 'read_only', not 'rw'",
        ),
        (
            json.dumps([resource("memstore_a", acess="read_only")]),
            "resources[0] has unknown field(s): acess",
        ),
        (
            json.dumps([resource("memstore_a", instructions=5)]),
            "resources[0]: instructions must be a string, not a number",
        ),
    ],
)
def test_malformed_configs_are_refused_with_a_precise_message(text: str, expected: str) -> None:
    problems = problems_of(text)
    assert any(expected in problem for problem in problems), problems


def test_an_owner_for_every_mount_of_the_session() -> None:
    config = parse_config(
        json.dumps(
            {"owner": {"uid": 1000, "gid": "root", "umask": "027"}, "resources": [resource("m")]}
        )
    )
    assert config.owner == Owner(uid=1000, gid=0, umask=0o027)
    assert config.owner.mount_arguments() == ["--uid", "1000", "--gid", "0", "--umask", "0027"]
    assert parse_config(json.dumps([resource("m")])).owner == Owner()
    assert Owner().mount_arguments() == []


def test_replay_legacy_journal_is_passed_to_every_store_of_the_session() -> None:
    """A session serves each store as ``memfs mount`` would: the option that replays a journal
    of an earlier memfs (which recorded no workspace) reaches each store, and only when asked."""
    from memfs.cli import build_parser
    from memfs.commands.session import _mount_options

    plans = [
        MountPlan(
            Attachment("memstore_a", "read_write", "", 0), store("memstore_a", "a"), ROOT / "a"
        ),
        MountPlan(
            Attachment("team", "read_write", "", 1, "databricks", "agent-7"),
            databricks_store("team", ""),
            ROOT / "team",
        ),
    ]

    def replayed(*argv: str) -> list[bool]:
        args = build_parser().parse_args(["session", "--config", "c.json", *argv])
        options = _mount_options(args, plans, ROOT, "sesn_x", Owner())
        return [spec.replay_legacy_journal for spec in options.stores]

    assert replayed("--replay-legacy-journal") == [True, True]
    assert replayed() == [False, False]


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        ("nobody", "'owner' must be an object with uid, gid, umask, not a string"),
        ({"user": 5}, "'owner' has unknown field(s): user"),
        ({"uid": "no-such-user-here"}, "owner.uid: no user named 'no-such-user-here'"),
        ({"uid": -1}, "owner.uid: user id -1 is out of range"),
        ({"gid": True}, "owner.gid: a group must be a name or a number, not True"),
        ({"umask": "999"}, "owner.umask: umask '999' is not an octal number"),
        ({"umask": 18}, "owner.umask: umask 18 is not an octal number"),
    ],
)
def test_a_bad_owner_is_refused_naming_the_field(owner: object, expected: str) -> None:
    problems = problems_of(json.dumps({"owner": owner, "resources": [resource("m")]}))
    assert any(expected in problem for problem in problems), problems


def test_more_than_eight_stores_are_refused() -> None:
    problems = problems_of(json.dumps([resource(f"memstore_{i}") for i in range(9)]))
    assert problems == ["the session attaches 9 memory stores; at most 8 are allowed"]
    assert (
        len(parse_config(json.dumps([resource(f"memstore_{i}") for i in range(8)])).attachments)
        == 8
    )


def test_instructions_over_4096_characters_are_refused_and_4096_accepted() -> None:
    ok = parse_config(json.dumps([resource("memstore_a", instructions="é" * MAX_INSTRUCTIONS)]))
    assert len(ok.attachments[0].instructions) == MAX_INSTRUCTIONS
    problems = problems_of(json.dumps([resource("memstore_a", instructions="x" * 4097)]))
    assert problems == [
        "resources[0]: instructions for memstore_a are 4097 characters; at most 4096 are allowed"
    ]


def test_the_same_store_twice_is_refused() -> None:
    problems = problems_of(json.dumps([resource("memstore_a"), resource("memstore_a")]))
    assert problems == [
        "resources[1] attaches memstore_a again (already resources[0]); attach each store once"
    ]


def test_every_problem_is_reported_not_only_the_first() -> None:
    problems = problems_of(
        json.dumps([resource("memstore_a", access="x"), {"type": "memory_store"}])
    )
    assert len(problems) == 2


def test_load_config_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SessionError) as info:
        load_config(tmp_path / "nope.json")
    assert info.value.problems == [
        f"cannot read session config {tmp_path / 'nope.json'}: No such file or directory"
    ]


def attach(*items: tuple[str, str]) -> list[Attachment]:
    return [Attachment(sid, access, "", i) for i, (sid, access) in enumerate(items)]  # type: ignore[arg-type]


def test_plan_mounts_places_each_store_at_its_slug(tmp_path: Path) -> None:
    stores = {
        "memstore_a": store("memstore_a", "Demo Memory"),
        "memstore_b": store("memstore_b", "Team: Notes!"),
    }
    plans = plan_mounts(
        attach(("memstore_a", "read_write"), ("memstore_b", "read_only")), stores, tmp_path / "root"
    )
    assert [(p.path, p.read_only) for p in plans] == [
        (tmp_path / "root" / "demo-memory", False),
        (tmp_path / "root" / "team-notes", True),
    ]
    assert not (tmp_path / "root").exists()  # planning creates nothing


def test_unknown_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SessionError) as info:
        plan_mounts(attach(("memstore_x", "read_only")), {"memstore_x": None}, tmp_path)
    assert info.value.problems == ["resources[0]: memory store memstore_x does not exist"]


def test_archived_store_is_refused_read_write_and_accepted_read_only(tmp_path: Path) -> None:
    stores = {"memstore_a": store("memstore_a", "Old", archived=True)}
    with pytest.raises(SessionError) as info:
        plan_mounts(attach(("memstore_a", "read_write")), stores, tmp_path)
    assert info.value.problems == [
        "resources[0]: memory store memstore_a ('Old') is archived and cannot be attached "
        "read_write; attach it read_only"
    ]
    assert plan_mounts(attach(("memstore_a", "read_only")), stores, tmp_path)[0].read_only


def test_two_stores_with_the_same_slug_are_refused(tmp_path: Path) -> None:
    stores = {
        "memstore_a": store("memstore_a", "My Notes"),
        "memstore_b": store("memstore_b", "my-notes"),
    }
    with pytest.raises(SessionError) as info:
        plan_mounts(
            attach(("memstore_a", "read_write"), ("memstore_b", "read_write")), stores, tmp_path
        )
    assert info.value.problems == [
        "memory stores memstore_a ('My Notes') and memstore_b ('my-notes') would both mount at "
        f"{tmp_path / 'my-notes'}; rename one of them"
    ]


def test_a_name_without_letters_or_digits_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SessionError) as info:
        plan_mounts(
            attach(("memstore_a", "read_write")),
            {"memstore_a": store("memstore_a", "!!!")},
            tmp_path,
        )
    assert "gives an empty directory name" in info.value.problems[0]


def test_the_root_must_be_absent_or_an_empty_directory(tmp_path: Path) -> None:
    """The root is the one mount point: what is in it would be hidden by the mount (the stores'
    directories are the mount's own), and a link would have the mount cover where it points."""

    def problems(root: Path) -> list[str]:
        try:
            plan_mounts(attach(("memstore_a", "read_write")), {"memstore_a": store("a", "a")}, root)
        except SessionError as exc:
            return exc.problems
        return []

    (tmp_path / "empty").mkdir()
    (tmp_path / "busy" / "a").mkdir(parents=True)  # even the store's own directory
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    assert problems(tmp_path / "absent") == []
    assert problems(tmp_path / "empty") == []
    assert problems(tmp_path / "busy") == [
        f"session root {tmp_path / 'busy'} exists and is not empty (1 entries)"
    ]
    assert problems(tmp_path / "file") == [
        f"session root {tmp_path / 'file'} exists and is not a directory"
    ]
    assert problems(tmp_path / "link") == [
        f"session root {tmp_path / 'link'} is a symbolic link; remove it (memfs never mounts "
        "through one)"
    ]


def test_prompt_names_each_mount_its_path_access_kind_description_and_instructions() -> None:
    plans = [
        MountPlan(
            Attachment("memstore_a", "read_write", "Keep one file per customer.", 0),
            store("memstore_a", "Customer Notes", description="What we know\nabout customers."),
            Path("/mnt/memory/customer-notes"),
        ),
        MountPlan(
            Attachment("memstore_b", "read_only", "", 1),
            store("memstore_b", "Style Guide"),
            Path("/mnt/memory/style-guide"),
        ),
        MountPlan(
            Attachment("team-memory", "read_write", "", 2, "databricks", "agent-7", "s1"),
            databricks_store("team-memory", "What the team learned"),
            Path("/mnt/memory/team-memory"),
        ),
    ]
    prompt = render_prompt(plans, Path("/mnt/memory"))
    assert prompt.startswith("# Memory\n\nYou have 3 memory stores mounted as directories.")
    memory_stores = (
        "- Kind: Memory Stores store; every change of a file is kept as a version under "
        "`.versions/` (read-only, reachable by name, never listed)\n"
    )
    assert (
        "## Customer Notes\n\n- Path: `/mnt/memory/customer-notes`\n- Access: read-write\n"
        f"{memory_stores}- Description: What we know about customers.\n\nInstructions:\n\n"
        "Keep one file per customer.\n"
    ) in prompt
    assert (
        "## Style Guide\n\n- Path: `/mnt/memory/style-guide`\n"
        f"- Access: read-only (you can read these files; writes fail)\n{memory_stores}"
    ) in prompt
    assert (
        "## team-memory\n\n- Path: `/mnt/memory/team-memory`\n- Access: read-write\n"
        "- Kind: Databricks Agent Memory store (the entries of actor agent-7, session s1); "
        "a file's description is its `user.description` extended attribute "
        "(`getfattr -n user.description FILE`, `setfattr -n user.description -v TEXT FILE`); "
        "no `.versions/`\n- Description: What the team learned\n"
    ) in prompt
    assert "Read-only file system" in prompt
    assert 'read `<path>/.search/<words>` (`cat <path>/.search/"tomato sauce"`)' in prompt
    assert (
        "The memory stores are the directories under `/mnt/memory` listed below. Any other "
        "name you create in `/mnt/memory` itself is local scratch: never uploaded, lost when "
        "the session ends. Moving a file between scratch and a store, or between two stores, "
        "copies it (`mv` copies, then removes the original).\n"
    ) in prompt


def databricks(store_id: str, **extra: object) -> dict[str, object]:
    return resource(store_id, api="databricks", **extra)


def test_databricks_resources_name_an_actor_and_maybe_a_session() -> None:
    config = parse_config(
        json.dumps(
            [
                databricks("team-memory", actor_id="agent-7", access="read_only"),
                databricks("team-memory", actor_id="agent-7", session_id="s1"),
                databricks("team-memory", actor_id="agent-8"),
                resource("memstore_a", api="memory_stores"),
            ]
        )
    )
    assert [(a.api, a.memory_store_id, a.actor_id, a.session_id) for a in config.attachments] == [
        ("databricks", "team-memory", "agent-7", None),
        ("databricks", "team-memory", "agent-7", "s1"),
        ("databricks", "team-memory", "agent-8", None),
        ("memory_stores", "memstore_a", None, None),
    ]
    assert config.attachments[0].read_only


def test_databricks_resource_errors_are_one_line_each() -> None:
    assert problems_of(
        json.dumps(
            [
                resource("memstore_a", api="dropbox"),
                databricks("team-memory"),
                resource("memstore_b", actor_id="agent-7", session_id="s1"),
                databricks("notes", actor_id=""),
                databricks("other", actor_id="agent-7", session_id=7),
                databricks("twice", actor_id="agent-7", session_id="s1"),
                databricks("twice", actor_id="agent-7", session_id="s1"),
            ]
        )
    ) == [
        "resources[0]: api must be 'memory_stores' or 'databricks', not 'dropbox'",
        "resources[1]: a Databricks store needs an 'actor_id' (whose entries to mount)",
        'resources[2]: actor_id and session_id go only with "api": "databricks" '
        "(a Memory Stores store has no actors)",
        "resources[3]: actor_id must be a non-empty string, not ''",
        "resources[4]: session_id must be a non-empty string, not 7",
        "resources[6] attaches Databricks store twice (actor agent-7, session s1) again "
        "(already resources[5]); attach each store once",
    ]


def test_a_databricks_store_mounts_at_its_id_or_with_its_actor_and_session(
    tmp_path: Path,
) -> None:
    config = parse_config(
        json.dumps(
            [
                databricks("team-memory", actor_id="agent-7"),
                databricks("team-memory", actor_id="Agent 8", session_id="s1"),
                databricks("solo", actor_id="agent-7"),
                resource("memstore_a"),
            ]
        )
    )
    stores = {
        "databricks/team-memory": databricks_store("team-memory", ""),
        "databricks/solo": databricks_store("solo", ""),
        "memstore_a": store("memstore_a", "Solo"),
    }
    with pytest.raises(SessionError) as info:
        plan_mounts(config.attachments, stores, tmp_path)
    assert info.value.problems == [
        "memory stores Databricks store solo (actor agent-7) and memstore_a ('Solo') would both "
        f"mount at {tmp_path / 'solo'}; rename one of them"
    ]
    stores["memstore_a"] = store("memstore_a", "Notes")
    plans = plan_mounts(config.attachments, stores, tmp_path)
    assert [plan.slug for plan in plans] == [
        "team-memory-agent-7",
        "team-memory-agent-8-s1",
        "solo",
        "notes",
    ]
    del stores["databricks/solo"]
    with pytest.raises(SessionError) as info:
        plan_mounts(config.attachments, stores, tmp_path)
    assert info.value.problems == ["resources[2]: Databricks store solo does not exist"]


def test_session_ids() -> None:
    first, second = new_session_id(), new_session_id()
    assert first.startswith("sesn_") and len(first) == 29 and first != second
    assert check_session_id(first) == first
    for bad in ("", "a b", "x" * 129, "sesn_\n", "é"):
        with pytest.raises(SessionError):
            check_session_id(bad)


def test_state_file_round_trip_outside_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMFS_STATE_DIR", str(tmp_path / "state"))
    path = state_path(tmp_path / "root")
    assert path.parent == tmp_path / "state"
    assert state_path(tmp_path / "root") == path != state_path(tmp_path / "other")
    assert SessionState.read(path) is None
    state = SessionState(
        pid=os.getpid(),
        root="/r",
        session_id="sesn_x",
        status="running",
        mounts=[{"path": "/r/a"}],
        problems=["p"],
        created_root=True,  # what a session that dies leaves for the next to clean up
    )
    state.write(path)
    assert SessionState.read(path) == state
    path.write_text("{not json")
    assert SessionState.read(path) is None
