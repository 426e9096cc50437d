"""Chapter: layer norm the tutorial way, dW/dB reduced across GROUP_SIZE_M locked buffers."""
