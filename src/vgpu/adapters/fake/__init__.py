"""In-memory adapters that behave like the real ones; for tests, the simulator and embedders."""
