"""The client configurations of docs/mcp.md are valid JSON, start ``memfs mcp`` with arguments
its parser accepts (and no usage error), and keep keys out of ``args``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from memfs.cli import build_parser
from memfs.commands.mcp import usage_error

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def test_every_configuration_in_the_docs_starts_a_valid_memfs_mcp() -> None:
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    servers = [server for block in blocks for server in json.loads(block)["mcpServers"].values()]
    assert len(servers) == 3
    apis = set()
    for server in servers:
        assert server["command"] == "memfs"
        args = build_parser().parse_args(server["args"])
        assert args.command == "mcp"
        assert usage_error(args) is None, server["args"]
        apis.add(args.api)
        env = server.get("env", {})
        assert all(isinstance(value, str) for value in env.values())
        secrets = [value for name, value in env.items() if name.endswith(("_KEY", "_TOKEN"))]
        assert not any(secret in arg for secret in secrets for arg in server["args"])
    assert apis == {"memory-stores", "databricks"}
