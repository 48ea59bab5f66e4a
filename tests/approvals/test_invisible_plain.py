"""The plain-text fast path of `approvals.invisible`: skipping the look at each character
of printable ASCII text never lets a hidden character through unmarked.

`PLAIN` is a set of characters, so checking each of the 128 ASCII characters settles it
for every text: `plain(text)` holds only when each character of `text` is one `PLAIN`
takes, and no character outside ASCII is one. The properties then check that every
function taking the fast path answers what its look at each character answers.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.invisible import (
    count_hidden,
    escape,
    is_hidden,
    label,
    marker,
    pieces,
    plain,
    reveal,
    spelled_out,
)
from tests.approvals.test_pages_card_hidden import HIDDEN

ASCII = [chr(code) for code in range(128)]


def test_plain_takes_exactly_the_ascii_characters_that_are_not_hidden() -> None:
    taken = [char for char in ASCII if plain(char)]
    assert taken == [char for char in ASCII if not is_hidden(char)]
    assert "\r" not in taken and "\x1b" not in taken and "\x7f" not in taken and "\x00" not in taken
    assert len(taken) == 97  # 95 printable characters, the tab and the newline


def test_plain_takes_no_character_beyond_ascii() -> None:
    assert not any(plain(char) for char in map(chr, range(128, 0x3000)))
    for _, char, _ in HIDDEN:
        assert not plain(char) and not plain(f"ls -la{char}")


# Texts of ASCII, its control characters among them, now and then with a hidden character
# or a visible one beyond ASCII (which must take the slow path and still come out the same);
# and texts the fast path would take but for one character, ASCII or hidden.
PRINTABLE = st.text(
    alphabet=st.sampled_from([char for char in ASCII if char.isprintable() or char in "\t\n"]), max_size=20
)
TEXTS = st.one_of(
    st.text(
        alphabet=st.one_of(
            st.sampled_from(ASCII),
            st.sampled_from([char for _, char, _ in HIDDEN]),
            st.characters(),
        ),
        max_size=40,
    ),
    st.builds(
        "{}{}{}".format,
        PRINTABLE,
        st.sampled_from([*ASCII, *(char for _, char, _ in HIDDEN)]),
        PRINTABLE,
    ),
)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_each_function_answers_what_its_look_at_each_character_answers(text: str) -> None:
    hidden = [char for char in text if is_hidden(char)]
    assert count_hidden(text) == len(hidden)
    assert spelled_out(text) == "".join(f"⟨{label(char)}⟩" if is_hidden(char) else char for char in text)
    assert str(reveal(text)) == "".join(str(marker(char) if is_hidden(char) else escape(char)) for char in text)
    found = pieces(text)
    assert "".join(source for _, source in found) == text
    assert [source for kind, source in found if kind == "hidden"] == hidden
    assert not any(kind == "text" and (source == "" or count_hidden(source)) for kind, source in found)


def test_plain_text_is_escaped_and_a_hidden_character_still_marked() -> None:
    assert str(reveal("echo '<b>' && ls\n\tx")) == "echo &#x27;&lt;b&gt;&#x27; &amp;&amp; ls\n\tx"
    assert str(reveal("ls\u200b -la")) == 'ls<span class="hc" title="U+200B ZERO WIDTH SPACE">⟨ZWSP⟩</span> -la'
    assert spelled_out("rm\u202e -rf") == "rm⟨RLO⟩ -rf"
    assert count_hidden("a\rb\x7fc") == 2
