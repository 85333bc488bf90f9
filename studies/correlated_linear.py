"""y = x1 + x2 + x3, vectorized: with x2 and x3 correlated, the Shapley effects have a closed
form (Iooss and Prieur 2019)."""


def correlated_linear(x1, x2, x3):
    return {"y": x1 + x2 + x3}
