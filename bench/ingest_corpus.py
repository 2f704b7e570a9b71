"""Seeded corpora for ``bench/ingest.py``, one per file mix, generated once into ``bench/.cache``.

- ``transcripts``: long meeting transcripts (half WebVTT, half ``[hh:mm:ss] Speaker: text``).
- ``markdown``: many small handbook pages (a title, an intro, one to three sections of a
  paragraph or two each), in folders of 100, some with front matter.
- ``pdf``: multi-page handbook PDFs (fpdf2's core fonts, as ``examples/make_pdf.py``),
  a few sections a page.

Sentences come from ``bench.synthetic.Talk``: handbook templates filled with its names,
services and numbers, mixed with its meeting sentences. The same seed always gives the
same files, so a corpus is cached by its parameters.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from rich.progress import Progress

from bench.synthetic import (
    GENERATOR_VERSION,
    SERVICES,
    TERMS,
    Talk,
    meeting,
    meeting_date,
    meeting_title,
    to_transcript,
    to_vtt,
)
from retrieval.ingest.metadata import slug

CACHE = Path(__file__).resolve().parent / ".cache"
MIXES = ("transcripts", "markdown", "pdf")
CORPUS_VERSION = 1  # bump when the Markdown or PDF text changes
PAGE_KINDS = ("runbook", "guide", "policy", "how-to", "FAQ", "onboarding notes", "checklist")
SECTIONS = (
    "Overview|When to use this|Before you start|Steps|Rollback|Who to ask|Known issues|"
    "Escalation|Access|Monitoring|Costs|History|Limits|Testing|Ownership|Deadlines"
).split("|")
HANDBOOK = (
    "To rotate the {term} on the {service}, open a ticket like {ticket} and ask {first}.",
    "The {team} team owns the {service}; page them through the {team} rotation.",
    "Every change to the {term} needs a second reviewer from the {team} team.",
    "Expect the {service} to take about {small} minutes to come back after a restart.",
    "If {metric} drops below {pct} percent for ten minutes, roll back {version}.",
    "New engineers get access to the {service} in their first week, after the {term} training.",
    "Do not restart the {term} during business hours in {region}.",
    "The runbook for the {service} lives next to this page; keep both up to date.",
    "We budget {money} a month for {term}; ask {name} before raising it.",
    "The {service} keeps {num} days of logs; older ones are in the archive bucket.",
    "Deploys to {region} happen on {day} mornings unless {first} says otherwise.",
    "Customers such as {customer} are told at least {small} days before a {term} change.",
    "The on-call engineer checks the {metric} dashboard at the start of each shift.",
    "Write the decision and its reason in the {service} channel, then link it here.",
    "Requests to the {service} time out after {ms} milliseconds; retries back off.",
    "Backups of the {term} run nightly at {clock} UTC and are tested monthly.",
    "Ask for {term} access in the access channel; {name} approves it.",
    "Version {version} of the {service} is the last one that supports {term}.",
    "A postmortem is due within {small} working days of any SEV1 on the {service}.",
    "Load on the {service} peaks at about {num} requests a second on {day}s.",
    "Secrets for the {service} are in the secrets manager, never in the repository.",
    "Questions about this page go to {name} or the {team} team's channel.",
)


def corpus_dir(mix: str, files: int, minutes: float, seed: int) -> Path:
    """Where the corpus for these parameters is cached."""
    if mix == "transcripts":
        return CACHE / f"ingest-v{GENERATOR_VERSION}-f{files}-m{minutes:g}-s{seed}"
    return CACHE / f"ingest-{mix}-v{GENERATOR_VERSION}.{CORPUS_VERSION}-f{files}-s{seed}"


def build_corpus(mix: str, files: int, minutes: float, seed: int, progress: Progress) -> Path:
    """Write the corpus of ``mix`` unless it is cached; returns its folder."""
    folder = corpus_dir(mix, files, minutes, seed)
    if (folder / ".complete").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    task = progress.add_task(f"writing {mix} corpus", total=files)
    for i in range(files):
        if mix == "transcripts":
            _transcript(tmp, i, minutes, seed)
        elif mix == "markdown":
            _markdown(tmp, i, seed)
        else:
            _pdf(tmp, i, seed)
        progress.advance(task)
    progress.remove_task(task)
    (tmp / ".complete").touch()
    tmp.rename(folder)
    return folder


def _transcript(folder: Path, i: int, minutes: float, seed: int) -> None:
    talk = Talk(f"ingest-{seed}-{i}")
    title, day = meeting_title(talk), meeting_date(talk)
    lines = meeting(talk, minutes)
    if i % 2:
        path, text = folder / f"{day}-{slug(title)}-{i:03d}.txt", to_transcript(lines)
    else:
        path, text = folder / f"{day}-{slug(title)}-{i:03d}.vtt", to_vtt(lines)
    path.write_text(text, encoding="utf-8")


def _title(talk: Talk) -> str:
    subject = talk.rng.choice((*SERVICES, *TERMS))
    return f"{subject[:1].upper()}{subject[1:]} {talk.rng.choice(PAGE_KINDS)}"


def _paragraph(talk: Talk, low: int, high: int) -> str:
    """``low``-``high`` sentences, mostly handbook prose, some said in a meeting."""
    rng = talk.rng
    return " ".join(
        talk.fill(rng.choice(HANDBOOK)) if rng.random() < 0.7 else talk.sentence()
        for _ in range(rng.randint(low, high))
    )


def _markdown(folder: Path, i: int, seed: int) -> None:
    talk = Talk(f"markdown-{seed}-{i}")
    rng = talk.rng
    title = _title(talk)
    lines: list[str] = []
    if rng.random() < 0.3:
        lines += ["---", f"title: {title}", f"recorded_at: {meeting_date(talk)}", "---", ""]
    lines += [f"# {title}", "", _paragraph(talk, 1, 3), ""]
    for section in rng.sample(SECTIONS, rng.randint(1, 3)):
        lines += [f"## {section}", ""]
        for _ in range(rng.randint(1, 2)):
            lines += [_paragraph(talk, 2, 4), ""]
    team = folder / f"team-{i // 100:02d}"
    team.mkdir(exist_ok=True)
    (team / f"{slug(title)}-{i:04d}.md").write_text("\n".join(lines), encoding="utf-8")


def _pdf(folder: Path, i: int, seed: int) -> None:
    from fpdf import FPDF  # a dev dependency; only the PDF mix needs it

    talk = Talk(f"pdf-{seed}-{i}")
    rng = talk.rng
    title = _title(talk)
    pdf = FPDF()
    pdf.set_creation_date(datetime(2024, 1, 1, tzinfo=UTC))
    pdf.set_auto_page_break(auto=True, margin=15)
    for page in range(rng.randint(4, 10)):
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 15)
        heading = title if page == 0 else f"{page + 1}. {rng.choice(SECTIONS)}"
        pdf.multi_cell(0, 8, heading, align="L", new_x="LMARGIN", new_y="NEXT")
        pdf.ln(2)
        for _ in range(rng.randint(2, 4)):
            pdf.set_font("Helvetica", "B", 11)
            pdf.multi_cell(0, 6, rng.choice(SECTIONS), align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", "", 10)
            pdf.multi_cell(0, 5, _paragraph(talk, 3, 6), align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
    pdf.output(str(folder / f"{slug(title)}-{i:03d}.pdf"))
