"""A `cuda` package whose `cuda.tile` cannot be imported."""
