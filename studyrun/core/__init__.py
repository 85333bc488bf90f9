"""What every layer of studyrun shares: the design and outcome of runs, a batch's output, the run
table, errors and message text. Imports nothing else of studyrun."""
