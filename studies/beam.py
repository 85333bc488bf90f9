"""A cantilever beam of rectangular section: its area and the bending stress at its root. A
stand-in for an expensive structural model (a finite-element run of minutes), one run a call."""


def cantilever(width, depth, load=2000.0, length=1500.0):
    """width, depth and length in mm, load in N at the free end: the section's area (mm^2) and
    the largest bending stress, 6 load length / (width depth^2) (MPa)."""
    return {"area": width * depth, "stress": 6 * load * length / (width * depth**2)}
