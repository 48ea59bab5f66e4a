"""A 375 px phone: every page fits without horizontal scrolling, and the queue is usable."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser.conftest import ask, in_thread, wait_live

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 375, "height": 812}


class PhoneLayoutTests:
    def test_it_has_no_horizontal_scroll_at_375_px(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        from approvals import services

        long = "find / -name '*.py' -exec grep -l " + "averyveryverylongargumentwithoutanyspaces" * 4 + " {} +"
        req = ask(ci_bot.agent, long)
        other = ask(ci_bot.agent)
        in_thread(services.request_decide, other.pk, services.Answer(behavior="deny", surface="web", user=alice))
        page = page_for(alice, **PHONE)
        wait_live(page)
        page.wait_for_selector(f"#req-{req.pk}")
        for path in (
            "/",
            "/audit/",
            "/denials/",
            "/rules/",
            "/agents/",
            "/profile/",
            "/notifications/",
            f"/requests/{req.pk}/",
        ):
            page.goto(page.url.split("/", 3)[0] + "//" + page.url.split("/", 3)[2] + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 375, f"{path} is {width}px wide at 375px"

    def test_it_lets_a_thumb_reach_allow_on_a_phone(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        page = page_for(alice, **PHONE)
        wait_live(page)
        page.wait_for_selector(f"#req-{req.pk} button[value='once']", state="visible")
        button = page.locator(f"#req-{req.pk} button[value='once']")
        box = button.bounding_box()
        assert box is not None and box["height"] >= 44 and box["width"] >= 120
        button.click()
        page.wait_for_selector(f"#req-{req.pk}[data-state='decided']", timeout=5_000)

    @pytest.mark.parametrize(
        ("tool", "field", "selector"),
        [
            ("Bash", "command", ".input pre.shell"),
            ("Write", "content", ".input pre.diff"),
            ("mcp__search__query", "args", ".input pre.json"),
            ("Glob", "pattern", ".input dd code"),
        ],
    )
    def test_it_wraps_a_long_command_between_words_never_inside_one(
        self, page_for: Any, alice: Any, ci_bot: Any, tool: str, field: str, selector: str
    ) -> None:
        """A 375 px card wraps `--query13=value13` whole to the next line: never `--` / `query13=…`.

        A browser breaks a line after a dash; each word of the input is kept whole (a command,
        a diff, JSON and a plain field alike), while a word wider than the card still wraps
        (test_it_has_no_horizontal_scroll_at_375_px).
        """
        words = [f"--query{n}=value{n}" if n % 3 else f"segment-{n}" for n in range(40)]
        text = "mytool " + " ".join(words) + " end"
        path = {"file_path": "/tmp/proj/run.sh"} if tool == "Write" else {}
        req = ask(ci_bot.agent, tool_name=tool, tool_input={field: text, **path})
        page = page_for(alice, **PHONE)
        wait_live(page)
        page.wait_for_selector(f"#req-{req.pk} {selector}")
        lines_per_word = page.evaluate(
            """(selector) => {
              // Each blank-delimited word of the shown text: the line bottoms its characters sit on.
              const box = document.querySelector(selector);
              const chars = [];
              const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
              for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                for (let i = 0; i < node.data.length; i++) chars.push([node, i]);
              }
              const result = {};
              let start = null;
              for (let k = 0; k <= chars.length; k++) {
                const blank = k === chars.length || /\\s/.test(chars[k][0].data[chars[k][1]]);
                if (!blank && start === null) start = k;
                if (blank && start !== null) {
                  const range = document.createRange();
                  range.setStart(chars[start][0], chars[start][1]);
                  range.setEnd(chars[k - 1][0], chars[k - 1][1] + 1);
                  const bottoms = new Set([...range.getClientRects()].map((r) => Math.round(r.bottom)));
                  result[range.toString()] = bottoms.size;
                  start = null;
                }
              }
              return result;
            }""",
            f"#req-{req.pk} {selector}",
        )
        assert set(words) <= set(lines_per_word), lines_per_word
        box = page.locator(f"#req-{req.pk} {selector}").bounding_box()
        assert box is not None and box["height"] > 100, "the input must wrap onto several lines"
        assert {word: n for word, n in lines_per_word.items() if n != 1} == {}
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        shown = page.locator(f"#req-{req.pk} {selector}").text_content() or ""
        assert text in shown, "the card shows the input's own characters, nothing added"
