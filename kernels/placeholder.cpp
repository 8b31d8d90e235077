// filled in by the fused path
