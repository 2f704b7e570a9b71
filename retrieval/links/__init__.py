"""Links: deep links to a moment or a page, signed page links (capabilities), and the
media store, the only files those pages serve."""
