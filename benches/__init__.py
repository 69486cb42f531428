"""baton's benchmarks (run with ``benches/run``)."""
