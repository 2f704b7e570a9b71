"""The quick answer pipeline on a real Weaviate with a hand-written fake Claude."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest
import pytest_asyncio

from bot.answer.answer import (
    AnswerConfig,
    QuickAnswerer,
    heuristic_rewrite,
    looks_like_follow_up,
)
from bot.answer.extractive import NO_MODEL, UNAVAILABLE, closest
from bot.answer.followup import precheck
from bot.engine import Engine
from bot.models import PartialAnswer, ProgressEvent, Question, ThreadKey
from bot.sessions import Exchange, SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.links.links import media_link
from retrieval.models import SearchFilters
from retrieval.search.search import KbArchive, SearchService
from retrieval.store.weaviate import WeaviateStore
from tests.fakes import FakeArchive, FakeLLM, overloaded
from tests.sample_archive import DEEP_DIVE, KICKOFF, load_sample

THREAD = ThreadKey("console", "local", "c", "t")


def ask(text: str, kb: str = "x", **kw: object) -> Question:
    return Question(text=text, thread=THREAD, user="u1", kb=kb, **kw)  # type: ignore[arg-type]


def past(question: str, answer: str, query: str | None = None) -> Exchange:
    return Exchange(1, question, query, answer, "answer", "quick", 0.0)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sample_kb(store: WeaviateStore, embedder: SentenceTransformerEmbedder) -> str:
    name = "answer_sample"
    await store.delete_source(name, "kickoff")
    await load_sample(store, embedder, name)
    return name


@pytest.fixture
def archive(
    sample_kb: str, store: WeaviateStore, embedder: SentenceTransformerEmbedder
) -> KbArchive:
    return SearchService(store, embedder).archive(sample_kb)


def number_of(prompt: str, needle: str) -> int:
    """The [n] of the source whose text contains ``needle`` in a rendered prompt."""
    for block in re.split(r"\n(?=\[\d+\])", prompt):
        m = re.match(r"\[(\d+)\]", block)
        if m and needle in block:
            return int(m.group(1))
    raise AssertionError(f"{needle!r} not in the prompt")


async def test_prompt_numbers_sources_with_title_time_and_speaker(archive: KbArchive) -> None:
    llm = FakeLLM()
    llm.enqueue(
        lambda call: f"The hosted UI can't be restyled [{number_of(call.prompt, 'hosted UI')}]."
    )
    events: list[object] = []

    async def sink(e: object) -> None:
        events.append(e)

    out = await QuickAnswerer(llm, AnswerConfig(search_k=4)).answer(
        ask("What are the limits of the hosted UI login page?", archive.kb), archive, (), sink
    )
    call = llm.history[-1]
    assert call.kind == "stream"
    prompt = call.prompt
    assert "## Auth deep dive (video, 2024-01-23)" in prompt
    # Each source: [n] time range (from its first sentence) · speakers, then its text
    # (merged with its neighbours), one line per turn with the second it starts.
    assert re.search(
        r"\n\[\d+\] 11:18\u201314:10 \u00b7 [^\n]+\n[^[]*\(12:14\) John Park: The hosted UI", prompt
    )
    assert re.search(r"## Auth kickoff \(video, 2024-01-09\)\n\[1\] 0:00\u2013", prompt)
    assert "What are the limits of the hosted UI login page?" in prompt
    answer = out.answer
    assert answer.kind == "answer"
    assert len(answer.citations) == 1
    cite = answer.citations[0]
    # before the engine aligns it, a citation opens its passage's first sentence (11:18)
    assert cite.link == media_link(DEEP_DIVE.url or "", 678)
    assert cite.link == "https://www.loom.com/share/feedbeef?t=678"
    assert cite.label == "Auth deep dive @ 11:18"
    assert int(cite.start_s or 0) == 678 and cite.speaker == "John Park"
    assert set(answer.timings) >= {"rewrite", "search", "expand", "assemble", "llm", "render"}
    assert any(isinstance(e, ProgressEvent) and "Searching" in e.text for e in events)
    partials = [e.text for e in events if isinstance(e, PartialAnswer)]
    assert partials and partials[-1].startswith("The hosted UI can't be restyled")


async def test_sources_grouped_by_recording_in_time_order(archive: KbArchive) -> None:
    llm = FakeLLM()
    llm.enqueue("Cost and reliability [1].")
    out = await QuickAnswerer(llm, AnswerConfig(search_k=8)).answer(
        ask("Why did we move off Auth0?", archive.kb), archive
    )
    sources = out.answer.sources
    assert [s.n for s in sources] == list(range(1, len(sources) + 1))
    order = [(s.hit.source.recorded_at, s.hit.segment.start_s, s.hit.segment.page) for s in sources]
    assert order == sorted(order, key=lambda o: (o[0], o[1] or 0.0, o[2] or 0))
    # Windows of one recording that touch are one passage, without the repeated overlap.
    ids = [s.hit.source.id for s in sources]
    kickoff = [s for s in sources if s.hit.source.id == "kickoff"]
    assert ids.count("kickoff") == len(kickoff) >= 1
    text = "\n".join(s.hit.segment.text for s in kickoff)
    assert text.count("There are three reasons to leave Auth0.") == 1


async def test_invented_citation_is_dropped(archive: KbArchive) -> None:
    llm = FakeLLM()
    llm.enqueue("Cost [1], and something made up [9]. Also [1, 9].")
    out = await QuickAnswerer(llm).answer(ask("Why did we move off Auth0?", archive.kb), archive)
    assert out.answer.text == "Cost [1], and something made up. Also [1]."
    assert [c.n for c in out.answer.citations] == [1]


async def test_follow_up_is_rewritten_with_the_fast_model(archive: KbArchive) -> None:
    llm = FakeLLM()
    llm.enqueue("problems John Park mentioned about Auth0", "He mentioned cost [1].")
    history = [past("What did John say about Auth0?", "He wants to leave Auth0 [1].")]
    out = await QuickAnswerer(llm).answer(
        ask("what problems did he mention?", archive.kb), archive, history
    )
    rewrite, answer = llm.history
    assert rewrite.kind == "complete" and rewrite.model == "fake-fast"
    assert "What did John say about Auth0?" in rewrite.prompt
    assert "what problems did he mention?" in rewrite.prompt
    assert out.answer.standalone_query == "problems John Park mentioned about Auth0"
    # The answer call sees the history as turns, without the old [n] markers.
    assert answer.messages[0] == {"role": "user", "content": "What did John say about Auth0?"}
    assert answer.messages[1] == {"role": "assistant", "content": "He wants to leave Auth0."}


async def test_no_history_means_no_rewrite_call(archive: KbArchive) -> None:
    llm = FakeLLM()
    llm.enqueue("An answer [1].")
    out = await QuickAnswerer(llm).answer(ask("Why did we move off Auth0?", archive.kb), archive)
    assert [c.kind for c in llm.history] == ["stream"]
    assert out.answer.standalone_query == "Why did we move off Auth0?"


def test_heuristic_rewrite_appends_previous_key_terms() -> None:
    history = [past("What did John say about Auth0?", "...")]
    query = heuristic_rewrite("what problems did he mention?", history)
    assert query.startswith("what problems did he mention?")
    assert "John" in query and "Auth0" in query
    # A question that stands alone is left as it is.
    assert heuristic_rewrite("Why did the Cognito spike take two weeks?", history) == (
        "Why did the Cognito spike take two weeks?"
    )
    assert looks_like_follow_up("and Keycloak?")
    assert looks_like_follow_up("how was it fixed?")
    assert looks_like_follow_up("What did they decide?")
    assert not looks_like_follow_up("What is the Cognito hosted UI domain limit?")
    assert not looks_like_follow_up("What went wrong during the cut-over, and how was it fixed?")
    assert not looks_like_follow_up("What did Dana ask for in her security review?")


async def test_no_key_gives_extractive_answer_with_quotes_and_links(archive: KbArchive) -> None:
    history = [past("What did John say about Auth0?", "...")]
    out = await QuickAnswerer(None).answer(
        ask("what problems did he mention?", archive.kb), archive, history
    )
    answer = out.answer
    assert answer.kind == "extractive"
    assert "John" in (answer.standalone_query or "")
    assert answer.text.startswith(NO_MODEL)
    assert answer.citations and all(c.link for c in answer.citations)
    # the label links to the quoted moment when it is not where the passage starts
    assert re.search(
        r"- \*\*(\[)?Auth kickoff @ \d+:\d\d(\]\(https://\S+t=\d+s\))?\*\*: "
        r'John Park: "[^"]+" \[\d\]',
        answer.text,
    )


async def test_extractive_quotes_the_most_relevant_sentence(
    archive: KbArchive, embedder: SentenceTransformerEmbedder
) -> None:
    # as the bot runs it: with MiniLM comparing each sentence's meaning to the question
    quick = QuickAnswerer(None, embedder=embedder)
    out = await quick.answer(ask("Why did we move off Auth0?", archive.kb), archive)
    text = out.answer.text
    first = text.splitlines()[2]
    assert "There are three reasons to leave Auth0." in first
    quote = first.split('"')[1]
    assert quote.count(".") <= 3  # one or two sentences, not the whole window
    n = int(re.findall(r"\[(\d+)\]", first)[-1])
    cite = next(c for c in out.answer.citations if c.n == n)
    assert cite.link and cite.link.startswith(KICKOFF.url or "")
    assert "&t=" in cite.link


async def test_claude_failure_falls_back_to_extractive(archive: KbArchive) -> None:
    llm = FakeLLM()
    llm.enqueue(overloaded())
    out = await QuickAnswerer(llm).answer(ask("Why did we move off Auth0?", archive.kb), archive)
    assert out.answer.kind == "extractive"
    assert out.answer.text.startswith(UNAVAILABLE)
    assert out.answer.citations


async def test_empty_claude_reply_is_never_an_empty_answer(archive: KbArchive) -> None:
    llm = FakeLLM()
    llm.enqueue("   ")
    out = await QuickAnswerer(llm).answer(ask("Why did we move off Auth0?", archive.kb), archive)
    assert out.answer.kind == "extractive" and out.answer.text.strip()


async def test_nothing_found_suggests_speakers_and_dates(archive: KbArchive) -> None:
    filters = SearchFilters(speaker="Jon Parks", after=date(2025, 1, 1))
    out = await QuickAnswerer(None).answer(
        ask("What did Jon say about pricing?", archive.kb, filters=filters), archive
    )
    text = out.answer.text
    assert out.answer.kind == "nothing_found"
    assert text.startswith(
        "I couldn't find anything about \u201cWhat did Jon say about pricing\u201d in the archive."
    )
    assert "Widen the dates" in text and "after 2025-01-01" in text
    assert "did you mean *John Park*" in text
    assert "The archive has 3 sources" in text


async def test_empty_knowledge_base(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder
) -> None:
    archive = SearchService(store, embedder).archive("empty_kb_answer")
    out = await QuickAnswerer(None).answer(ask("Why did we move off Auth0?", "empty"), archive)
    assert out.answer.kind == "nothing_found"
    assert "quorum ingest" in out.answer.text


def test_closest_speakers() -> None:
    names = ["Priya Raman", "John Park", "Marcus Lee", "Dana Kim"]
    assert closest("jon", names)[0] == "John Park"
    assert closest("Marcos", names)[0] == "Marcus Lee"
    assert closest("zzzz", names) == []


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "error"),
        ("   ", "error"),
        ("x" * 5000, "error"),
        ("hi", "help"),
        ("Hello Quorum!", "help"),
        ("what can you do?", "help"),
        ("help", "help"),
        ("Why did we move off Auth0?", None),
        ("hi, why did we move off Auth0?", None),
    ],
)
def test_precheck(text: str, kind: str | None) -> None:
    answer = precheck(ask(text), 4000)
    assert (answer.kind if answer else None) == kind
    if answer and answer.kind == "error":
        assert answer.text.count(".") <= 2 and "\n" not in answer.text


async def test_help_makes_no_search_and_no_call(tmp_path: Path) -> None:
    llm = FakeLLM()
    async with SessionStore.open(tmp_path / "sessions.sqlite3") as sessions:
        engine = Engine(archives=lambda kb: FakeArchive(kb, down=True), sessions=sessions, llm=llm)
        answer = await engine.ask(ask("what can you do?"))
    assert answer.kind == "help" and "Quorum" in answer.text
    assert llm.history == []


class NoPages:
    """The real archive, except that transcript pages come back empty (as if positions
    were not 0..n-1), so widening must fall back to ``neighbours``."""

    def __init__(self, real: KbArchive) -> None:
        self.real = real
        self.kb = real.kb
        self.neighbour_calls = 0

    async def search(self, query: str, filters: SearchFilters | None = None, k: int = 8):
        return await self.real.search(query, filters, k)

    async def neighbours(self, hit_id: str, before: int = 1, after: int = 1):
        self.neighbour_calls += 1
        return await self.real.neighbours(hit_id, before, after)

    async def transcript(self, source_id: str, start_s=None, end_s=None, offset=0, limit=200):
        return []

    async def sources(self):
        return await self.real.sources()

    async def speakers(self):
        return await self.real.speakers()


async def test_widening_falls_back_to_neighbours(archive: KbArchive) -> None:
    fake = NoPages(archive)
    llm = FakeLLM()
    llm.enqueue(lambda call: f"Restyling is limited [{number_of(call.prompt, 'hosted UI')}].")
    out = await QuickAnswerer(llm, AnswerConfig(search_k=3)).answer(
        ask("What are the limits of the hosted UI login page?", archive.kb), fake
    )
    assert fake.neighbour_calls == 3
    # the passage (before the engine aligns its citations) opens at its first sentence
    assert out.answer.citations[0].link == "https://www.loom.com/share/feedbeef?t=678"
    # The window after the hit is there as context.
    assert "same time next Tuesday" in llm.history[-1].prompt


async def test_question_naming_a_speaker_and_a_date_searches_their_words_then(
    archive: KbArchive,
) -> None:
    quick = QuickAnswerer(None, AnswerConfig(search_k=4), today=lambda: date(2024, 2, 1))
    out = await quick.answer(
        ask("What did John say about the login in January?", archive.kb), archive
    )
    answer = out.answer
    assert answer.note == "Searched John Park's remarks, Jan 2024 first."
    firsts = [n.hit for n in sorted(answer.sources, key=lambda n: -n.hit.score)][:2]
    assert all("John Park" in h.segment.speakers for h in firsts)
    # A typed option wins over what the question says.
    typed = await quick.answer(
        ask(
            "What did John say about the login?",
            archive.kb,
            filters=SearchFilters(speaker="Priya Raman"),
        ),
        archive,
    )
    assert typed.answer.note is None
    assert all("Priya Raman" in n.hit.segment.speakers for n in typed.answer.sources)


async def test_a_typed_source_name_matching_no_title_says_what_it_chose(
    archive: KbArchive,
) -> None:
    out = await QuickAnswerer(None).answer(
        ask("hosted login page", archive.kb, filters=SearchFilters(source="dive")), archive
    )
    assert out.answer.note == "No source is called \u201cdive\u201d; searched *Auth deep dive*."
    exact = await QuickAnswerer(None).answer(
        ask("hosted login page", archive.kb, filters=SearchFilters(source="Auth deep dive")),
        archive,
    )
    assert exact.answer.note is None
