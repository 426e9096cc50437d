"""Chapter: vector addition, the Triton programming model in one kernel."""
