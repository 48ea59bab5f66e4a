"""Secrets in a call's input never reach a phone: a table of real shapes and a generated corpus.

`relay.masking.mask_secrets` is the one masker of the push, ntfy, Telegram and Slack
surfaces; these tests hold it to every shape of secret it claims, wherever it sits in a
command or a JSON document, and to leaving ordinary commands alone.
"""

from __future__ import annotations

import json
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.masking import MASK, mask_secrets

ALNUM = string.ascii_letters + string.digits
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

# (text, the secret that must be gone, what a person may still read)
TABLE: list[tuple[str, str, str]] = [
    (f"git push https://{GH}@github.com/acme/app", GH[4:], "ghp_"),
    (f"export GITHUB_TOKEN={GH}", GH[4:], "export GITHUB_TOKEN="),
    (
        "gh auth login --with-token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "0123456789_abc",
        "github_pat_",
    ),
    ("git clone https://oauth2:glpat-Zx9Yw8Vu7Ts6Rq5Po4Nm@gitlab.com/a/b", "Zx9Yw8Vu7Ts6Rq5Po4Nm", "gitlab.com"),
    ("curl -d token=xoxb-1234567890-0987654321-AbCdEfGhIjKl slack.com/api", "AbCdEfGhIjKl", "slack.com/api"),
    ("curl -X POST https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX", "XXXXXXXXXXXXXXXX", "curl -X POST"),
    ("aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE", "aws configure"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY aws s3 ls", "wJalrXUtnFEMI", "aws s3 ls"),
    (
        "curl 'https://maps.googleapis.com/x?key=AIzaSyA1234567890abcdefghijklmnopqrstuv'",
        "SyA1234567890abc",
        "maps.googleapis.com",
    ),
    ("stripe login --api-key sk_live_51H8abcdefghijklmnopqrstuv", "51H8abcdefghij", "stripe login"),
    ("ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 claude", "abcdefghijklmnop", "claude"),
    ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789 python run.py", "abcdefghijklmnop", "python run.py"),
    (
        "npm config set //registry.npmjs.org/:_authToken npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "abcdefghijklmnopqrst",
        "npm config set",
    ),
    (
        "twine upload -p pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEyMzQ1Njc4OQ dist/*",
        "AgEIcHlwaS5vcmc",
        "dist/*",
    ),
    ("SENDGRID_KEY=SG.abcdefghijklmnopqr.stuvwxyz0123456789ABCDEFG ./mail", "abcdefghijklmnopqr", "./mail"),
    (
        "curl https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1/getMe",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1",
        "getMe",
    ),
    (
        "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N' x",
        "dozjgNryP4J3jVmNHl0w5N",
        "Authorization: Bearer",
    ),
    (
        "cat > k.pem <<EOF\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA75\n-----END RSA PRIVATE KEY-----\nEOF",
        "MIIEpAIBAAKCAQEA75",
        "cat > k.pem",
    ),
    ('{"username": "bob", "password": "correct horse battery"}', "correct horse", '"username": "bob"'),
    ("mysql -u root -phunter22 shop", "hunter22", "mysql -u root"),
    ("psql postgres://app:s3cr3t-pw@db.internal:5432/shop", "s3cr3t-pw", "db.internal:5432/shop"),
    ("curl -u deploy:Tr0ub4dor https://ci.example.com/build", "Tr0ub4dor", "https://ci.example.com/build"),
    ("deploy --password 'p@ss w0rd' --env prod", "p@ss w0rd", "--env prod"),
    ("./release --api-key=9f8e7d6c5b4a3f2e1d0c", "9f8e7d6c5b4a3f2e1d0c", "./release"),
    ("curl -H 'X-Api-Key: 0123456789abcdef' https://api.example.com", "0123456789abcdef", "https://api.example.com"),
    ("docker login -u bob --password-stdin <<< 'Sup3rS3cret!'", "", "docker login"),
    ("client_secret: 'Zm9vYmFyYmF6cXV4'", "Zm9vYmFyYmF6cXV4", "client_secret"),
    ("gatehouse --token gha_" + "Q" * 43, "Q" * 43, "gatehouse"),
]

UNTOUCHED = [
    "git status",
    "npm run build && npm test",
    "rm -rf build/",
    "grep -rn secret src/",
    "git log --author=bob --since=yesterday",
    "cat ~/.ssh/id_rsa.pub",
    'git commit -m "fix token refresh and password reset"',
    "password=$DB_PASSWORD ./migrate",
    "export TOKEN=${CI_TOKEN}",
    '{"token": null, "prompt": "summarise the page"}',
    "python manage.py createtoken alice",
    "curl https://github.com/acme/app/pull/12",
    "ls -la /var/log | head -20",
    "pytest tests/relay/test_tokenizer.py -k auth",
]


class MaskTableTests:
    @pytest.mark.parametrize(("text", "secret", "kept"), TABLE, ids=[row[0][:40] for row in TABLE])
    def test_it_masks_each_known_shape_and_keeps_the_rest_readable(self, text: str, secret: str, kept: str) -> None:
        masked = mask_secrets(text)
        if secret:
            assert secret not in masked.text
            assert MASK in masked.text
            assert masked.changed
        assert kept in masked.text

    @pytest.mark.parametrize("text", UNTOUCHED)
    def test_it_leaves_ordinary_commands_alone(self, text: str) -> None:
        masked = mask_secrets(text)
        assert masked.text == text
        assert not masked.changed

    def test_it_masks_inside_pretty_json_as_the_cards_show_it(self) -> None:
        tool_input = {
            "url": "https://x.example/api",
            "headers": {"Authorization": f"token {GH}"},
            "api_key": "abc123xyz",
        }
        text = json.dumps(tool_input, indent=2)
        masked = mask_secrets(text).text
        assert GH[4:] not in masked and "abc123xyz" not in masked
        assert "https://x.example/api" in masked
        assert masked.count(MASK) >= 2


# --- the generated corpus -------------------------------------------------------------------

body = st.text(alphabet=ALNUM, min_size=36, max_size=36)
SHAPES = {
    "github": st.builds(lambda p, b: f"gh{p}_{b}", st.sampled_from("pousr"), body),
    "slack": st.builds(lambda p, b: f"xox{p}-{b[:12]}-{b[12:]}", st.sampled_from("abpo"), body),
    "aws": st.builds(lambda b: "AKIA" + b[:16].upper(), body),
    "google": st.builds(lambda b: "AIza" + b[:35], body),
    "stripe": st.builds(lambda m, b: f"sk_{m}_{b[:24]}", st.sampled_from(["live", "test"]), body),
    "anthropic": st.builds(lambda b: f"sk-ant-api03-{b}", body),
    "npm": st.builds(lambda b: f"npm_{b}", body),
    "jwt": st.builds(lambda b: f"eyJhbGciOi{b[:10]}.eyJzdWIi{b[10:22]}.{b[22:]}", body),
}
NAMES = ["password", "PASSWORD", "db_password", "api_key", "apiKey", "X-Api-Key", "client_secret", "GITHUB_TOKEN"]
password = st.text(alphabet=ALNUM + "!#%+/@^", min_size=8, max_size=30).filter(lambda s: not s.isdigit())
CONTEXTS = [
    "{}",
    "echo {} | gh auth login --with-token",
    "curl -H 'Authorization: Bearer {}' https://api.example.com",
    'some-cli --config \'{{"key": "{}"}}\'',
    "A=1 B={} ./run.sh",
    "cd /repo && deploy {} && echo done",
]


def _secret_part(secret: str) -> str:
    """The part of a secret that must never show (a shape may keep its prefix)."""
    return secret[-16:]


class MaskCorpusTests:
    @settings(max_examples=300, deadline=None)
    @given(kind=st.sampled_from(sorted(SHAPES)), data=st.data(), context=st.sampled_from(CONTEXTS))
    def test_no_generated_token_survives_in_any_context(self, kind: str, data: st.DataObject, context: str) -> None:
        secret = data.draw(SHAPES[kind])
        text = context.format(secret)
        masked = mask_secrets(text)
        assert _secret_part(secret) not in masked.text, (kind, text, masked.text)
        assert masked.changed

    @settings(max_examples=300, deadline=None)
    @given(name=st.sampled_from(NAMES), value=password, style=st.integers(0, 4))
    def test_no_named_secret_survives_in_any_notation(self, name: str, value: str, style: int) -> None:
        text = [
            f"{name}={value} ./run",
            f'{{"{name}": "{value}"}}',
            f"{name}: '{value}'",
            f"deploy --{name.lower()} {value} --now",
            f'export {name}="{value}"',
        ][style]
        masked = mask_secrets(text)
        # The value is gone; its name stays, so a value the name contains is no leak.
        assert value not in masked.text.replace(name, "").replace(name.lower(), ""), (text, masked.text)
        assert masked.changed

    @settings(max_examples=200, deadline=None)
    @given(user=st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=8), value=password)
    def test_no_url_password_survives(self, user: str, value: str) -> None:
        value = value.replace("@", "").replace("/", "")
        if not value or re.fullmatch(r"%[A-Za-z_]+%", value):  # `%NAME%`: a cmd variable, kept on purpose
            value = "pw12345678"
        text = f"git clone https://{user}:{value}@git.example.com/repo.git"
        masked = mask_secrets(text)
        assert f":{value}@" not in masked.text
        assert "git.example.com/repo.git" in masked.text


@pytest.mark.parametrize("filler", ["x", "-", "x ", "a=", "--token ", "http://a"])
def test_a_huge_input_is_cut_before_it_is_masked(filler: str) -> None:
    """A long run of name characters made every start position scan to the end (900 KB: hours)."""
    from relay.masking import MAX_MASKED_CHARS

    text = "GITHUB_TOKEN=abcdefghijklmnop echo " + filler * (900 * 1024 // len(filler))
    masked = mask_secrets(text).text
    assert len(masked) <= MAX_MASKED_CHARS + 1
    assert "abcdefghijklmnop" not in masked
