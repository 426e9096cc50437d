"""Chapter: layer norm, forward and backward with dW and dB, no locks."""
