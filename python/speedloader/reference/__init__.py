"""Reference implementations used by the tests (plain NumPy, no compiler or runtime involved)."""
