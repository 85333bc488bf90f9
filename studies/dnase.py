"""R's self-starting logistic SSlogis in log(conc), Asym / (1 + exp((xmid - log(conc)) / scal)),
at the concentrations of R's DNase assay: a curve y(x), its x given as the series' time."""

import numpy as np

CONC = np.array([0.04882812, 0.1953125, 0.390625, 0.78125, 1.5625, 3.125, 6.25, 12.5])


def sslogis(Asym, xmid, scal):
    return {"time": CONC, "density": Asym / (1 + np.exp((xmid - np.log(CONC)) / scal))}
