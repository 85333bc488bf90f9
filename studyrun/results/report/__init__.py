"""The report step: report.md and figures/ from analysis.json and the run store; computes nothing."""
