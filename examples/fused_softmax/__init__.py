"""Chapter: fused softmax, one read and one write per element."""
