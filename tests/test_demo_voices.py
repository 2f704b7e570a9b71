"""The demo's recordings made audible: espeak-ng speaks each line at its own second, a
voice per speaker, into an .m4a the browser plays."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from adapters.console.voices import RATE, speak_lines
from retrieval.links.kept_media import content_type


def test_each_line_is_heard_from_its_second_in_an_m4a(tmp_path: Path) -> None:
    out = tmp_path / "call.m4a"
    lines = [
        (1.0, "Priya", "We move the launch to June."),
        (6.0, "Marcus", "I own the checklist."),
        (10.0, "Priya", "Thanks, everyone."),
    ]
    speak_lines(lines, out)
    assert content_type(out) == "audio/mp4"
    with av.open(str(out)) as container:
        pcm = np.concatenate(
            [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
        ).astype(np.float64)
    loud = np.abs(pcm) > 0.02 * np.abs(pcm).max()

    def heard(a: float, b: float) -> bool:
        return bool(loud[int(a * RATE) : int(b * RATE)].any())

    assert not heard(0.0, 0.9)  # quiet until the first line's second
    assert heard(1.0, 2.0) and heard(6.0, 7.0) and heard(10.0, 11.0)
    assert not heard(5.0, 5.9)  # the first line ended before the second began
