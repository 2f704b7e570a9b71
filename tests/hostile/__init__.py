"""The hostile probes: what a careless or malicious user, client or server sends to
Quorum through the command line and over HTTP (calendar ends, formula cells, malformed
requests and model chunks, races, a frozen store), each asserting the one sentence or
the handled result a person should see. Every new page, route or command extends them
from its first day."""
