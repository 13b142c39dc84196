//! Criterion benchmarks for Halo live in `benches/benches/`; this library is intentionally empty.
