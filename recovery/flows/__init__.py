"""Recovery flows: orchestration only. Nova calls go through recovery.nova;
time and concurrency through recovery.concurrency."""
