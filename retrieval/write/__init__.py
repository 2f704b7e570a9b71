"""The write path: a read document chunked, cut into levels, summarised and indexed;
recordings transcribed, transcripts written back out as captions."""
