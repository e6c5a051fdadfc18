"""Michaelis-Menten for puromycin_enzyme_kinetics: the example law of
docs/simulator-api.md ("Trying it on one machine"); the scorer refits the constants."""
import numpy as np

USED_INPUTS = ["conc"]
LAW_CONSTANTS = {"vm": 212.7, "km": 0.0641}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X, vm, km):
    x = np.asarray(X, dtype=float)[:, 0]
    return vm * x / (km + x)
