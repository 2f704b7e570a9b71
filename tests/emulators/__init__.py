"""Local emulators of the HTTP APIs Quorum talks to, for tests that run the real SDKs."""
