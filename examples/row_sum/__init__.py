"""Chapter: row sums of any width, the Learn tutorial "Reductions"."""
