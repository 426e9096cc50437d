"""Chapter: low-memory dropout, the mask regenerated from a seed instead of stored."""
