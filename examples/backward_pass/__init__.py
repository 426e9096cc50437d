"""Chapter: writing a backward pass, on a learnable swish small enough to see every term."""
