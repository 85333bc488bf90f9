"""Bayesian optimisation (efficient global optimisation) for `optimize` with `method: bayesian`:
`acquisition` the GPs and the acquisition they give, `search` the rounds and the results,
`report` its section of report.md."""
