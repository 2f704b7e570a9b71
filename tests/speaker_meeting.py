"""A meeting whose transcript labels its speakers as Quorum's diarization does ("Speaker
1…n"), written at test time as WebVTT: Speaker 2 owns the restore drill, Speaker 3 is
Speaker 1 again (a voice split in two), each of Speaker 3's lines following Speaker 1's."""

from __future__ import annotations

from pathlib import Path

from retrieval.write.captions import clock

LINES: list[tuple[str, str]] = [
    ("Speaker 1", "Good morning everyone, this is the weekly infrastructure review."),
    ("Speaker 3", "We have three items today, backups first and then the billing cutover."),
    ("Speaker 2", "Thanks. I looked at the backup jobs over the weekend in some detail."),
    ("Speaker 2", "The nightly snapshots are fine, but we have never tested a full restore."),
    ("Speaker 2", "So I want to run a restore drill on the staging cluster by Tuesday."),
    ("Speaker 1", "That sounds right to me, what do you need from the rest of us?"),
    ("Speaker 2", "A read-only window on staging for two hours, and someone from storage."),
    ("Speaker 2", "The drill restores last night's snapshot into a fresh namespace."),
    ("Speaker 2", "Then we compare row counts and checksums against production."),
    ("Speaker 1", "Okay, storage can lend you somebody on Monday afternoon."),
    ("Speaker 3", "I will send the invite for the restore drill after this call."),
    ("Speaker 2", "Great, and I'll write up the runbook so anyone can repeat it."),
    ("Speaker 1", "Next item is the billing cutover, which slipped last week."),
    ("Speaker 3", "The vendor moved their maintenance window to Thursday night."),
    ("Speaker 2", "Does that clash with the restore drill on staging at all?"),
    ("Speaker 1", "No, the cutover only touches the production billing database."),
    ("Speaker 3", "We decided to keep the old billing service warm for one week."),
    ("Speaker 2", "Then rollback is just a config flip, which is what I wanted."),
    ("Speaker 1", "Last item, the on-call rotation needs two more volunteers."),
    ("Speaker 3", "Please reply in the channel if you can take a week in March."),
    ("Speaker 2", "I can take the second week of March if nobody else wants it."),
    ("Speaker 1", "Thank you. That is everything for today, see you next week."),
]
CUE_S = 11.0  # each line's length in seconds: the meeting lasts four minutes


def write_meeting(folder: Path, name: str = "2024-06-04-infra-review") -> Path:
    """The meeting as ``name``.vtt in ``folder`` (with a title in its sidecar)."""
    folder.mkdir(parents=True, exist_ok=True)
    cues = ["WEBVTT"]
    for n, (speaker, text) in enumerate(LINES):
        start, end = n * CUE_S, n * CUE_S + CUE_S - 0.5
        cues.append(f"{clock(start)} --> {clock(end)}\n<v {speaker}>{text}</v>")
    path = folder / f"{name}.vtt"
    path.write_text("\n\n".join(cues) + "\n")
    (folder / f"{name}.meta.json").write_text('{"title": "Infra review"}')
    return path
