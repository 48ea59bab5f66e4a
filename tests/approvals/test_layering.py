"""`approvals` never imports `relay`, not even lazily: the relay plugs in at one composition root."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def relay_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{path.name}:{node.lineno} imports {n}" for n in names if n.split(".")[0] == "relay"]
    return found


class LayeringTests:
    def test_no_module_of_approvals_imports_relay(self) -> None:
        offenders = [hit for path in sorted((ROOT / "approvals").rglob("*.py")) for hit in relay_imports(path)]
        assert offenders == []

    def test_the_check_finds_a_lazy_import(self, tmp_path: Path) -> None:
        module = tmp_path / "probe.py"
        module.write_text("def f():\n    from relay.consumers import x\n    import relay.race\n    import relayed\n")
        assert relay_imports(module) == ["probe.py:2 imports relay.consumers", "probe.py:3 imports relay.race"]
