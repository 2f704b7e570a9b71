"""Hostile input: files built to break a reader (deep nesting, alias bombs, absurd times,
markup) each become that file's one-line failure, and the rest of the run goes on."""

from __future__ import annotations

import random
import time
from datetime import date
from pathlib import Path

import pytest

from bot.engine import Engine
from bot.models import Question, ThreadKey
from bot.sessions import SessionStore
from retrieval import ingest as ingest_module
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import IngestError, InvalidInput
from retrieval.ingest import read_source
from retrieval.ingest.cues import MAX_MEDIA_S, parse_clock
from retrieval.models import SearchFilters
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.chunking import Unit, chunk
from retrieval.write.indexer import MAX_REASON, ingest

GOOD = "[00:00:05] Ana Ruiz: The quillet service restarts nightly at two.\n"
DEEP = "[" * 30_000 + "]" * 30_000  # past the recursion limit, under 64 KiB
ALIAS_BOMB = """---
title: Bomb
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
speakers: [*g,*g,*g,*g,*g,*g,*g,*g,*g]
---
Body text.
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_deeply_nested_json_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="nested too deeply"):
        read_source(write(tmp_path / "deep.json", DEEP))


def test_deeply_nested_sidecar_is_a_clear_error(tmp_path: Path) -> None:
    write(tmp_path / "talk.meta.json", DEEP)
    with pytest.raises(IngestError, match="nested too deeply"):
        read_source(write(tmp_path / "talk.txt", GOOD))


def test_yaml_alias_bomb_is_refused_quickly_and_briefly(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    with pytest.raises(IngestError, match="aliases") as info:
        read_source(write(tmp_path / "bomb.md", ALIAS_BOMB))
    assert time.perf_counter() - t0 < 1
    assert len(str(info.value)) < 600


def test_a_bad_value_is_echoed_briefly(tmp_path: Path) -> None:
    huge = "[" + ", ".join(f"[{n}, {n}]" for n in range(3_000)) + "]"
    with pytest.raises(IngestError, match="speakers") as info:
        read_source(write(tmp_path / "notes.md", f"---\nspeakers: {huge}\n---\nBody.\n"))
    assert len(str(info.value)) < 400


def test_huge_front_matter_is_refused(tmp_path: Path) -> None:
    big = "description: " + "x" * 100_000 + "\n"
    with pytest.raises(IngestError, match="larger than"):
        read_source(write(tmp_path / "notes.md", f"---\n{big}---\nBody.\n"))


async def test_any_reader_failure_costs_one_file_and_the_rest_is_indexed(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "archive"
    write(root / "good.txt", GOOD)
    write(root / "deep.json", DEEP)
    write(root / "bomb.md", ALIAS_BOMB)
    write(root / "side.txt", "Ana Ruiz: Hello there.\n")
    write(root / "side.meta.json", DEEP)
    write(root / "buggy.vtt", "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nHi\n")

    def broken_reader(text: str, path: Path) -> list[object]:
        raise RecursionError("a reader bug")

    monkeypatch.setitem(ingest_module._TEXT_READERS, ".vtt", broken_reader)
    report = await ingest(store, embedder, kb, [root])
    failed = {Path(f.path).name: f.reason or "" for f in report.failed}
    assert set(failed) == {"deep.json", "bomb.md", "side.txt", "buggy.vtt"}
    assert failed["buggy.vtt"] == "could not be read (RecursionError)"
    assert all("\n" not in r and len(r) <= MAX_REASON for r in failed.values())
    assert report.count("added") == 1


@pytest.mark.parametrize("clock", ["99:99:99", "00:00:99", "01:75:00", "9999999:00:00", "1e308"])
def test_absurd_clock_times_are_not_times(clock: str) -> None:
    assert parse_clock(clock) is None


def test_long_transcripts_may_count_minutes_past_an_hour() -> None:
    assert parse_clock("75:20") == 75 * 60 + 20
    assert parse_clock("01:02:03.5") == 3723.5


def test_absurd_cue_times_are_refused(tmp_path: Path) -> None:
    vtt = "WEBVTT\n\n99:99:99.000 --> 100:00:00.000\nHello.\n"
    with pytest.raises(IngestError, match="bad cue timing"):
        read_source(write(tmp_path / "a.vtt", vtt))
    for start in ("1e308", "-5", "1e12"):
        whisper = f'{{"segments": [{{"start": {start}, "end": 2, "text": "Hi"}}]}}'
        with pytest.raises(IngestError, match="no start and end in seconds"):
            read_source(write(tmp_path / "w.json", whisper))


def test_out_of_order_cues_never_make_a_window_that_ends_before_it_starts(
    tmp_path: Path,
) -> None:
    srt = "".join(
        f"{n}\n00:{m:02d}:00,000 --> 00:{m:02d}:05,000\nWords said at minute {m}.\n\n"
        for n, m in enumerate([30, 2, 45, 1, 10, 5], 1)
    )
    doc = read_source(write(tmp_path / "shuffled.srt", srt))
    starts = [s.start_s or 0 for s in doc.segments]
    assert starts == sorted(starts)
    assert all((s.end_s or 0) >= (s.start_s or 0) for s in doc.segments)
    # The windowing holds on its own too, whatever order a reader hands it.
    units = [Unit("Later words here.", 600, 605), Unit("Earlier words here.", 5, 9)]
    assert all((s.end_s or 0) >= (s.start_s or 0) for s in chunk(units, "x"))


async def test_dates_past_weaviates_range_are_refused(search: SearchService, kb: str) -> None:
    with pytest.raises(InvalidInput, match="outside the dates"):
        await search.search(kb, "anything", SearchFilters(before=date(3000, 1, 1)))
    with pytest.raises(InvalidInput, match="outside the dates"):
        await search.search(kb, "anything", SearchFilters(after=date(1200, 1, 1)))


async def test_a_rejected_over_long_question_is_not_stored_in_full(
    search: SearchService, tmp_path: Path
) -> None:
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        engine = Engine(archives=search.archive, sessions=sessions, llm=None)
        thread = ThreadKey("console", "local", "c", "t")
        text = "why " * 250_000  # a megabyte
        answer = await engine.ask(Question(text=text, thread=thread, user="u", kb="kb"))
        assert answer.kind == "error" and "too long" in answer.text
        assert answer.exchange_id is not None
        stored = await sessions.exchange(answer.exchange_id)
    assert stored is not None and len(stored["question"]) < 5_000


SEEDS = {
    ".vtt": "WEBVTT\n\n00:00:01.000 --> 00:00:04.000\n<v Ana>Hello there.\n\n"
    "00:00:05.000 --> 00:00:09.000\nBo: And again.\n",
    ".srt": "1\n00:00:00,000 --> 00:00:03,000\nAna: Welcome.\n\n2\n00:00:03,000 --> 00:00:06,500\n"
    "The deploy went fine.\n",
    ".json": '{"segments": [{"start": 0.0, "end": 2.5, "text": "Hi", "speaker": "A"},'
    ' {"start": 2.5, "end": 4.0, "text": "There"}]}',
    ".txt": "[00:00:05] Ana Ruiz: Morning.\n[00:03:20] Bo: The cache evicts at ninety seconds.\n",
    ".md": "---\ntitle: Notes\nspeakers: [Ana]\n---\n# On-call\n\nPage the lead.\n\n## Paging\n"
    "\nUse the bot.\n",
}
NASTY = [
    "[/]",
    "99:99:99",
    "-1",
    "1e308",
    "NaN",
    "\x00",
    "\ufeff",
    "---",
    "&a",
    "*a",
    "{",
    "[",
    "-->",
]


def _mutants(seed: str, rng: random.Random, count: int) -> list[str]:
    """Seeded random damage to a good file: cuts, splices, repeats and nasty tokens."""
    out = []
    for _ in range(count):
        text = seed
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(0, len(text))
            match rng.randrange(5):
                case 0:
                    text = text[:at]
                case 1:
                    text = text[:at] + rng.choice(NASTY) + text[at:]
                case 2:
                    text = text[:at] + text[rng.randint(0, len(text)) :]
                case 3:
                    text = text[:at] + rng.choice(NASTY) * rng.randint(1, 3000) + text[at:]
                case _:
                    text = text.replace(rng.choice("0123456789:.,"), rng.choice(NASTY), 1)
        out.append(text)
    return out


@pytest.mark.parametrize("suffix", sorted(SEEDS))
def test_generated_damaged_files_fail_cleanly_or_read_consistently(
    tmp_path: Path, suffix: str
) -> None:
    rng = random.Random(f"quorum-{suffix}")
    for n, text in enumerate(_mutants(SEEDS[suffix], rng, 150)):
        path = tmp_path / f"m{n}{suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            doc = read_source(path)
        except IngestError as exc:
            assert len(str(exc)) < 2000, text
            continue
        for seg in doc.segments:
            if seg.start_s is not None:
                assert seg.end_s is not None and 0 <= seg.start_s <= seg.end_s <= MAX_MEDIA_S
