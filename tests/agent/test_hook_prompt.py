"""`--send-prompt`: the hook finds this turn's typed prompt in Claude Code's transcript.

Claude Code 2.1.332 writes its transcript on its own time: a PreToolUse hook that reads at
once can find the file without this turn's prompt yet (the real-CLI test caught it). The
hook waits for the line of the hook input's `prompt_id`, briefly, and never sends an older
turn's prompt in its place.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from agent.hook import last_prompt


def line(prompt_id: str, content: object, kind: str = "user") -> str:
    return json.dumps({"type": kind, "promptId": prompt_id, "message": {"role": "user", "content": content}}) + "\n"


def tool_result(prompt_id: str) -> str:
    return line(prompt_id, [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}])


class LastPromptTests:
    def test_it_takes_the_prompt_of_this_turn(self, tmp_path: Path) -> None:
        transcript = tmp_path / "t.jsonl"
        transcript.write_text(
            line("p1", "first turn") + tool_result("p1") + line("p2", "second turn") + tool_result("p2")
        )
        assert last_prompt(str(transcript), "p2") == "second turn"
        assert last_prompt(str(transcript), "p1") == "first turn"
        assert last_prompt(str(transcript)) == "second turn"

    def test_it_never_sends_an_older_turns_prompt_for_this_one(self, tmp_path: Path) -> None:
        transcript = tmp_path / "t.jsonl"
        transcript.write_text(line("p1", "delete the old branch") + tool_result("p1"))
        assert last_prompt(str(transcript), "p2", wait=0.05) == ""

    def test_it_waits_for_claude_code_to_write_the_prompt(self, tmp_path: Path) -> None:
        transcript = tmp_path / "t.jsonl"
        transcript.write_text(line("p1", "first turn"))
        written = threading.Event()

        def write_later() -> None:
            written.wait(5)
            with transcript.open("a") as handle:
                handle.write(line("p2", [{"type": "text", "text": "ship it"}]))

        writer = threading.Thread(target=write_later)
        writer.start()
        threading.Timer(0.1, written.set).start()
        try:
            assert last_prompt(str(transcript), "p2", wait=5) == "ship it"
        finally:
            writer.join(5)

    def test_a_missing_or_broken_transcript_is_no_prompt(self, tmp_path: Path) -> None:
        assert last_prompt(str(tmp_path / "none.jsonl"), "p1", wait=0.05) == ""
        broken = tmp_path / "b.jsonl"
        broken.write_text('{"type": "user", "promptId": "p1", "message": \n' + line("p1", "  ", "user"))
        assert last_prompt(str(broken), "p1", wait=0.05) == ""
