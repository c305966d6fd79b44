"""Side-by-side benchmarks: every figure is a ratio against an anchor measured in the same run."""
