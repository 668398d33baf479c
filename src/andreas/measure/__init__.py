"""Measuring real runs: profiling training scripts and validating predicted against measured
costs through the live service (see docs/service-measured.md, "Prove the predictions")."""
