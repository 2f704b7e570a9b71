"""Citations: the ``[n]`` grammar, labels and links (``citations``), each ``[n]`` moved to
the sentence that supports its claim (``align``), and the sentence vectors alignment
compares (``vectors``)."""
