"""Port specs written from recorded launches of a kernel library (`tileport specs`)."""
