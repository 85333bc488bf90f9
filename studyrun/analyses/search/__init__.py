"""Searching a parameter box through batched model runs: what calibrate and optimize share.

`batching` sends the rows that parallel searches ask for as one batch; `fit` holds the box, the
optimisers (least squares, Nelder-Mead, L-BFGS-B, differential evolution) and the statistics of
a least-squares fit.
"""
