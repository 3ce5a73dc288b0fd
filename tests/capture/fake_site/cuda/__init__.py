"""A stand-in for the `cuda` namespace, holding a fake `cuda.tile` for tests."""
