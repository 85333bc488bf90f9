"""Total Sobol' indices by OpenTURNS and chaospy polynomial chaos, on given training samples.

    /tmp/peerenv/bin/python benchmarks/peers/surrogate_peers.py SAMPLES.npz CASES.json OUT.json

Run by bench_surrogate.py in the peer environment (openturns, chaospy; never studyrun's).
CASES.json: {function: {"inputs": [[kind, a, b], ...], "q": [1.0, ...]}} with kind uniform
(low, high), normal (mean, std) or lognormal (mu, sigma of the logarithm). SAMPLES.npz holds
"{function}/{seed}/{n}/x" and ".../y". OUT.json: {approach: {function: {seed: {n: [ST...] or
"error: ..."}}}}, with the degree chosen and the seconds taken under "{approach}:info".

OpenTURNS: for each total degree p = 1, 2, ..., FunctionalChaosAlgorithm with
FixedStrategy(basis, size of degree p) and LeastSquaresStrategy(
LeastSquaresMetaModelSelectionFactory(LARS(), CorrectedLeaveOneOut())), a linear (q = 1) or
hyperbolic enumerate function; the degree kept is the one whose selected model has the least
corrected leave-one-out error (the least of getErrorHistory()); stops two degrees past the best or
at 1,500 candidate terms. Marginal polynomials: StandardDistributionPolynomialFactory of each
marginal, but Hermite for the lognormal (OpenTURNS maps it to a standard normal; Stieltjes on
the lognormal itself is ill-conditioned). Indices: FunctionalChaosSobolIndices.getSobolTotalIndex.

chaospy: generate_expansion(p, dist, normed=True) with the largest total order p whose term
count is at most n / 2 (oversampling 2, the usual rule for point collocation) and at most 12,
fit_regression (least squares). ST from the orthonormal expansion's coefficients (the sum of the
squared coefficients of the terms involving input i over all non-constant ones): chaospy.Sens_t
gives the same numbers but took 112 s for 8 inputs at degree 3; it is compared on the fits of
up to 100 runs (info "sens_t_diff").
"""

import json
import math
import sys
import time
import warnings

import numpy as np

MAX_TERMS_OT = 1500
PATIENCE = 2


def ot_marginals(ot, inputs):
    kinds = {"uniform": ot.Uniform, "normal": ot.Normal, "lognormal": ot.LogNormal}
    return [kinds[kind](a, b) for kind, a, b in inputs]


def openturns_st(x, y, inputs, q):
    import openturns as ot

    ot.Log.Show(ot.Log.NONE)
    marginals = ot_marginals(ot, inputs)
    distribution = ot.JointDistribution(marginals)
    factories = [ot.HermiteFactory() if kind == "lognormal" else
                 ot.StandardDistributionPolynomialFactory(m)
                 for (kind, _, _), m in zip(inputs, marginals)]
    d = len(inputs)
    enumerate_ = (ot.LinearEnumerateFunction(d) if q == 1.0
                  else ot.HyperbolicAnisotropicEnumerateFunction(d, q))
    basis = ot.OrthogonalProductPolynomialFactory(factories, enumerate_)
    X, Y = ot.Sample(x), ot.Sample(y[:, None])
    best, worse = None, 0
    for p in range(1, 30):
        size = enumerate_.getBasisSizeFromTotalDegree(p)
        if size > MAX_TERMS_OT:
            break
        selection = ot.LeastSquaresMetaModelSelectionFactory(ot.LARS(), ot.CorrectedLeaveOneOut())
        algo = ot.FunctionalChaosAlgorithm(X, Y, distribution, ot.FixedStrategy(basis, size),
                                           ot.LeastSquaresStrategy(selection))
        algo.run()
        result = algo.getResult()
        error = min(result.getErrorHistory())
        if best is None or error < best[0]:
            best, worse = (error, p, result), 0
        else:
            worse += 1
            if worse >= PATIENCE:
                break
    error, p, result = best
    sobol = ot.FunctionalChaosSobolIndices(result)
    return [float(sobol.getSobolTotalIndex(i)) for i in range(d)], {"degree": p}


def chaospy_st(x, y, inputs):
    import chaospy

    marginals = [{"uniform": chaospy.Uniform, "normal": chaospy.Normal,
                  "lognormal": chaospy.LogNormal}[kind](a, b) for kind, a, b in inputs]
    dist = chaospy.J(*marginals)
    d, n = len(inputs), len(y)
    p = 1
    while p < 12 and math.comb(d + p + 1, p + 1) <= n / 2:
        p += 1
    expansion = chaospy.generate_expansion(p, dist, normed=True)
    model, coefficients = chaospy.fit_regression(expansion, x.T, y, retall=1)
    involved = np.array([np.asarray(term.exponents).max(axis=0) > 0 for term in expansion])
    power = np.where(involved.any(axis=1), np.asarray(coefficients, dtype=float) ** 2, 0.0)
    st = [float(power[involved[:, i]].sum() / power.sum()) for i in range(d)]
    info = {"degree": p}
    if n <= 100:
        info["sens_t_diff"] = float(np.max(np.abs(chaospy.Sens_t(model, dist) - st)))
    return st, info


def main():
    samples = np.load(sys.argv[1])
    cases = json.loads(open(sys.argv[2]).read())
    keys = sorted({k.rsplit("/", 1)[0] for k in samples.files},
                  key=lambda k: (k.split("/")[0], int(k.split("/")[1]), int(k.split("/")[2])))
    out = {}
    for key in keys:
        function, seed, n = key.split("/")
        x, y = samples[key + "/x"], samples[key + "/y"]
        spec = cases[function]
        jobs = [(f"openturns q={q:g}", openturns_st, (x, y, spec["inputs"], q))
                for q in spec["q"]] + [("chaospy", chaospy_st, (x, y, spec["inputs"]))]
        for approach, job, arguments in jobs:
            start = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    value, info = job(*arguments)
            except Exception as error:  # reported in the table, not hidden
                value, info = f"error: {type(error).__name__}: {error}"[:300], {}
            info["seconds"] = round(time.perf_counter() - start, 3)
            out.setdefault(approach, {}).setdefault(function, {}).setdefault(seed, {})[n] = value
            out.setdefault(approach + ":info", {}).setdefault(function, {}).setdefault(
                seed, {})[n] = info
            print(approach, key, info, flush=True)
        with open(sys.argv[3], "w") as handle:  # after every sample: a long run can be read early
            json.dump(out, handle)


if __name__ == "__main__":
    main()
