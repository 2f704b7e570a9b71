"""Citations: the ``[n]`` grammar, labels and links (``citations``), a window's sentences
with their seconds and where a link to one opens (``sentences``), each ``[n]`` moved to
the sentence that supports its claim (``align``), and the sentence vectors alignment
compares (``vectors``). Used by the quick path and deep research; imports neither."""
