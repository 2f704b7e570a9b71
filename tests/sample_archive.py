"""A small archive built in code for the answer tests: two recorded meetings and a PDF,
with known windows (the hosted UI remark starts at 12:14 = 734 s in the Loom recording)."""

from __future__ import annotations

from datetime import date

from retrieval.encoding.embed import Embedder
from retrieval.models import Document, Segment, Source
from retrieval.store import Embedded, Store

KICKOFF = Source(
    id="kickoff",
    title="Auth kickoff",
    kind="video",
    url="https://www.youtube.com/watch?v=abc123",
    recorded_at=date(2024, 1, 9),
    speakers=("Priya Raman", "John Park", "Marcus Lee"),
)
DEEP_DIVE = Source(
    id="deep-dive",
    title="Auth deep dive",
    kind="video",
    url="https://www.loom.com/share/feedbeef",
    recorded_at=date(2024, 1, 23),
    speakers=("Priya Raman", "Dana Kim", "John Park"),
)
PLAN = Source(
    id="plan",
    title="Auth migration plan",
    kind="document",
    url="https://docs.example/plan.pdf",
    recorded_at=date(2024, 2, 8),
)
HOSTED_UI_S = 734.0

_P, _J, _M, _D = "Priya Raman", "John Park", "Marcus Lee", "Dana Kim"


def _timed(source: Source, rows: list[tuple[float, float, tuple[str, ...], str]]) -> Document:
    segs = tuple(
        Segment(source.id, i, text, start_s=a, end_s=b, speakers=spk)
        for i, (a, b, spk, text) in enumerate(rows)
    )
    return Document(source, segs)


KICKOFF_DOC = _timed(
    KICKOFF,
    [
        (
            0,
            58,
            (_P,),
            "Okay, we're recording. Today we decide whether we leave Auth0, "
            "and what we look at instead.",
        ),
        (
            55,
            121,
            (_J,),
            "There are three reasons to leave Auth0. Reason one is cost: the renewal quote jumps "
            "from two thousand one hundred to nine thousand eight hundred dollars a month, because "
            "of enterprise SSO connection pricing.",
        ),
        (
            118,
            180,
            (_J,),
            "Reason two is reliability. Auth0 had a forty-minute login outage on January fourth, "
            "and we had no levers to pull. Reason three is the Management API limit of two "
            "requests a second, which breaks our nightly user sync.",
        ),
        (
            176,
            240,
            (_M, _J),
            "Marcus Lee: Migrations are where outages come from, though.\n"
            "John Park: True. So we migrate users lazily, on login, with a Lambda.",
        ),
        (
            236,
            300,
            (_P,),
            "Let's book a two-week Cognito spike. John owns it, and Dana reviews the threat model.",
        ),
    ],
)
DEEP_DIVE_DOC = _timed(
    DEEP_DIVE,
    [
        (
            0,
            62,
            (_P,),
            "Welcome back. Housekeeping first: the offsite moves to Thursday, "
            "and lunch is on the fourth floor.",
        ),
        (
            60,
            130,
            (_D,),
            "Also, the coffee machine on four is broken again, so bring your own mugs.",
        ),
        (
            672,
            736,
            (_D, _P),
            "Dana Kim: Let's park the SAML question until next week.\n"
            "Priya Raman: Agreed, it's noted in the doc.",
        ),
        (
            HOSTED_UI_S,
            790,
            (_J,),
            "The hosted UI is the weak spot. We can't fully restyle the hosted login page, and a "
            "custom domain needs a certificate in us-east-1.",
        ),
        (788, 850, (_P,), "We're over time. Thanks everyone, same time next Tuesday."),
    ],
)
PLAN_DOC = Document(
    PLAN,
    (
        Segment(
            "plan",
            0,
            "Auth migration plan. Goal: move login from Auth0 to AWS Cognito by the end of "
            "February, with no forced password resets.",
            page=1,
        ),
        Segment(
            "plan",
            1,
            "Rollback: a per-organisation auth_provider flag sends an organisation back to "
            "Auth0 within minutes.",
            page=5,
        ),
    ),
)
SAMPLE = (KICKOFF_DOC, DEEP_DIVE_DOC, PLAN_DOC)


async def load_sample(store: Store, embedder: Embedder, kb: str) -> None:
    """Embed and write the sample archive into ``kb``."""
    for doc in SAMPLE:
        vectors = await embedder.embed_documents([s.text for s in doc.segments])
        [result] = await store.upsert_many(kb, [Embedded(doc, vectors)])
        assert not isinstance(result, Exception), result
