"""Page links as capabilities, without a server: a token names one knowledge base, one
source and an expiry; any change, an expiry passed or another secret refuses it; the
secret is made once in the data dir, readable by its owner only."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from retrieval.errors import ConfigError
from retrieval.links.share import SECRET_FILE, BadLink, Grant, LinkSigner, load_secret


def test_a_token_grants_its_source_until_it_expires_and_nothing_else() -> None:
    signer = LinkSigner(b"s" * 32, "https://quorum.example.com/", ttl_days=1)
    token = signer.token("team", "retro", now=1000.0)
    grant = signer.check(token, now=2000.0)
    assert grant == Grant("team", "retro", grant.expires) and grant.expires >= 1000 + 86400
    assert signer.page("team", "retro").startswith("https://quorum.example.com/v/")
    with pytest.raises(BadLink) as expired:
        signer.check(token, now=grant.expires + 1)
    assert expired.value.expired
    body, sig = token.split(".")
    other = signer.token("team", "kickoff").split(".")[0]
    for bad in (f"{other}.{sig}", f"{body}.{sig[:-1]}A", body, "", "a.b.c", "!!.??"):
        with pytest.raises(BadLink) as refused:
            signer.check(bad, now=2000.0)
        assert not refused.value.expired, bad
    with pytest.raises(BadLink):  # the secret rotated: every old link stops
        LinkSigner(b"t" * 32, "https://quorum.example.com").check(token, now=2000.0)


def test_the_secret_is_made_once_in_the_data_dir_for_its_owner_only(tmp_path: Path) -> None:
    made = load_secret(tmp_path / "data")
    assert len(made) == 64 and load_secret(tmp_path / "data") == made
    mode = (tmp_path / "data" / SECRET_FILE).stat().st_mode
    assert stat.S_IMODE(mode) == 0o600
    assert load_secret(tmp_path / "data", "a" * 16) == b"a" * 16
    with pytest.raises(ConfigError, match="at least 16"):
        load_secret(tmp_path / "data", "short")
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ConfigError, match="QUORUM_LINK_SECRET"):
        load_secret(tmp_path / "file")
    lazy = LinkSigner(lambda: load_secret(tmp_path / "file"), "http://localhost:8088")
    with pytest.raises(ConfigError):  # only when a link is signed
        lazy.page("team", "retro")
