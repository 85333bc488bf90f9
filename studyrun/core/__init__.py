"""What every layer of studyrun shares: the design and outcome of runs, a batch's output, the run
table, errors and message text; the one CSV reader, every call of git, a model's exit told from
Ctrl-C, and the child process that runs batches. Imports nothing else of studyrun."""
