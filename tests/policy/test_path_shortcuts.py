"""The engine's shortcuts on paths answer exactly as the long way does.

A reported path is checked on its string rather than through ``normpath``; protected
directories are looked up by a path's components rather than tried at every one; a
path's place under each rule root is worked out once for every call, not once per call.
"""

from __future__ import annotations

import posixpath
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.facts import MAX_PATH_CHARS, is_normal_absolute
from policy.paths import PROTECTED_DIRS, PROTECTED_EXEMPT, _protected_dir
from policy.pipeline.context import CallContext, build_context
from policy.tools import lookup


def _normal_by_normpath(path: str) -> bool:
    """The definition: absolute, no NUL, not ``//``-rooted, and what normpath leaves alone."""
    return (
        path.startswith("/")
        and not path.startswith("//")
        and "\x00" not in path
        and len(path) <= MAX_PATH_CHARS
        and posixpath.normpath(path) == path
    )


class NormalAbsoluteTests:
    @settings(max_examples=2000)
    @given(st.text(alphabet="/.a\x00~", max_size=12))
    def test_it_agrees_with_normpath_on_slashes_and_dots(self, path: str) -> None:
        assert is_normal_absolute(path) == _normal_by_normpath(path)

    @settings(max_examples=500)
    @given(st.lists(st.sampled_from(["", ".", "..", "...", "a", ".a", "a.", "..a", "é", " "]), max_size=6))
    def test_it_agrees_with_normpath_on_components(self, parts: list[str]) -> None:
        for path in ("/" + "/".join(parts), "/".join(parts), "/" + "/".join(parts) + "/"):
            assert is_normal_absolute(path) == _normal_by_normpath(path), path

    @pytest.mark.parametrize("size", [MAX_PATH_CHARS - 1, MAX_PATH_CHARS, MAX_PATH_CHARS + 1])
    def test_it_keeps_the_length_bound(self, size: int) -> None:
        path = "/" + "a" * (size - 1)
        assert is_normal_absolute(path) == (size <= MAX_PATH_CHARS)

    @pytest.mark.parametrize("value", [None, 5, b"/a", ["/a"]])
    def test_it_refuses_what_is_not_a_string(self, value: object) -> None:
        assert not is_normal_absolute(value)


def _protected_by_definition(parts: list[str]) -> str | None:
    """The first place (then the first entry, in list order) a protected directory starts."""
    for index in range(len(parts)):
        for entry in PROTECTED_DIRS:
            size = entry.count("/") + 1
            if "/".join(parts[index : index + size]) != entry:
                continue
            tail = "/".join(parts[index:])
            if any(tail == e or tail.startswith(e + "/") for e in PROTECTED_EXEMPT):
                continue
            return entry
    return None


_COMPONENTS = sorted({p for entry in (*PROTECTED_DIRS, *PROTECTED_EXEMPT) for p in entry.split("/")})


class ProtectedDirectoryTests:
    @settings(max_examples=2000)
    @given(st.lists(st.sampled_from([*_COMPONENTS, "", "src", "hooks", "config", "x"]), max_size=7))
    def test_it_finds_what_the_definition_finds(self, parts: list[str]) -> None:
        assert _protected_dir(parts) == _protected_by_definition(parts)

    @pytest.mark.parametrize(
        ("path", "expected"),
        [
            ("/srv/p/.config/git/config", ".config/git"),
            ("/srv/p/.config/other", None),
            ("/srv/p/.claude/worktrees/a/.git/hooks", ".git"),
            ("/srv/p/.claude/worktrees/a", None),
            ("/srv/p/.claude/settings.json", ".claude"),
        ],
    )
    def test_it_names_the_directory(self, path: str, expected: str | None) -> None:
        assert _protected_dir(path.split("/")) == expected


class RuleRootsTests:
    def _context(self, home: str | None, cwd: str = "/srv/project") -> CallContext:
        spec = lookup("Read").spec
        assert spec is not None
        return build_context(spec, {}, cwd=cwd, home=home, mode="default", additional=(), now=datetime.now(UTC))

    def test_each_home_and_project_has_its_own_answer(self) -> None:
        path = "/home/alice/notes/x"
        alice, bob = self._context("/home/alice"), self._context("/home/bob")
        elsewhere = self._context("/home/alice", cwd="/home/alice/notes")
        assert alice.relative_to_roots(path)["home"] == "notes/x"
        assert bob.relative_to_roots(path)["home"] is None
        assert alice.bucket_keys(path) == (("abs", "home"), ("abs", ""), ("home", "notes"), ("home", ""))
        assert elsewhere.relative_to_roots(path)["cwd"] == "x"
        assert alice.relative_to_roots(path)["cwd"] is None

    def test_a_shared_answer_cannot_be_changed_by_one_call(self) -> None:
        found = self._context("/home/alice").relative_to_roots("/srv/project/a")
        with pytest.raises(TypeError):
            found["cwd"] = "elsewhere"  # type: ignore[index]
