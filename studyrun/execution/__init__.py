"""Running a plan's runs: batches, retries and the pilot (execute), the executors and batch-system
clusters they go to, the progress line, the step check of equation models."""
