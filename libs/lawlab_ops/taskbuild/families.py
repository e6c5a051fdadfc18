"""The standard families of each kind of law, as rivals for the Parallel-world
builder's identifiability screen (issue #48).

:mod:`lawlab_ops.taskbuild.worlds` keeps a hidden law only where a competent
experimenter, in simulated budgets, prefers it over every rival. Until now the
rivals came from the task's own catalogue of mechanisms
(:mod:`lawlab.worlds.mechanisms`) and the generic grammar
(:mod:`lawlab_ops.taskbuild.synthesis`). A scientist in the field tries the
literature's families first: Antoine's and the Clausius-Clapeyron equation for a
vapour pressure, the logistic, Gompertz and Richards curves for growth, the
log-logistic and Weibull curves for a dose-response, and so on. This module
writes them down per scientific *kind*, each with the citation it comes from:

- :data:`KINDS` maps a kind to its families (:class:`Family`); :data:`GENERIC`
  holds the families every task gets (a straight line and a power-law product in
  the inputs, a quadratic, an exponential and a log-linear law in the primary
  input);
- :data:`KIND_OF` maps every task of ``lawlab/tasks/task_specs`` to its kind;
- :func:`guess` gives data-driven starting values for a family (linearisations,
  profiles over one nonlinear constant with the linear ones solved, quantiles);
- :func:`rivals_for` turns a task's families into :class:`FamilyRival` s: the
  expression in the task's own input names, constants renamed away from names
  already taken, and on Type II tasks the per-group constants as local names.

A family's ``expr`` is a template: ``{x}`` (also ``{x0}``) is the task's primary
(first) input, ``{x1}``, ``{x2}`` ... its second, third ... inputs; ``{xmin}`` is
the primary input's smallest value in the data (an origin, so that a rate
constant is not multiplied by a calendar year); ``{T0}`` is the absolute zero of
the primary input's temperature scale (:data:`ABSOLUTE_ZERO`, per task). A
generic family repeats its ``each`` term for every input (or every positive
input), with ``{i}`` its index from 1 and ``{xi}`` the input. ``positive``
names the placeholders that must be positive in the data for the family to apply.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lawlab.law.expr import BRANCHES, FUNCTIONS, NAMED_NUMBERS, Expression

log = logging.getLogger("lawlab_ops.taskbuild")


@dataclass(frozen=True)
class Family:
    """One standard family: ``expr`` a template (see the module docstring) in the
    constants ``params``; ``local`` the constants that are per group on Type II
    tasks; ``citation`` where the family comes from."""

    name: str
    expr: str
    params: tuple[str, ...]
    citation: str
    local: tuple[str, ...] = ()
    positive: tuple[str, ...] = ()
    each: str = ""
    each_positive: bool = False


@dataclass
class FamilyRival:
    """A family made concrete for one task: ready for ``WorldBuilder.fit``."""

    name: str
    expr: str
    global_names: list[str]
    local_names: list[str]
    init: dict[str, float]
    citation: str


# ---- citations used more than once ---------------------------------------------------

RITZ_2015 = ("Ritz, Baty, Streibig & Gerhard 2015, Dose-Response Analysis Using R, "
             "PLoS ONE 10:e0146021")
GIBALDI = "Gibaldi & Perrier 1982, Pharmacokinetics, 2nd ed., Marcel Dekker"
REID = ("Reid, Prausnitz & Poling 1987, The Properties of Gases and Liquids, 4th ed., "
        "McGraw-Hill, ch. 7")
TJORVE = ("Tjorve 2003, Shapes and functions of species-area curves: a review of possible "
          "models, J. Biogeogr. 30:827")
SPURR = "Spurr 1952, Forest Inventory, Ronald Press, New York"
KEELING = ("Keeling, Bacastow, Bainbridge, Ekdahl, Guenther, Waterman & Chin 1976, Atmospheric "
           "carbon dioxide variations at Mauna Loa Observatory, Hawaii, Tellus 28:538")
HARMONIC = "Bloomfield 1976, Fourier Analysis of Time Series: An Introduction, Wiley"
SEASON = "a1 * sin(2 * pi * {x}) + b1 * cos(2 * pi * {x})"

# ---- the families, per kind -------------------------------------------------------------

GENERIC: tuple[Family, ...] = (
    Family("generic_linear", "a{each}", ("a", "b{i}"),
           "a straight line in every input (least squares; Legendre 1805, Nouvelles methodes "
           "pour la determination des orbites des cometes)", each=" + b{i} * {xi}"),
    Family("generic_power", "a{each}", ("a", "b{i}"),
           "a power-law product in every positive input (log-log regression; Huxley 1932, "
           "Problems of Relative Growth, Methuen)", each=" * {xi} ** b{i}", each_positive=True),
    Family("generic_quadratic", "a + b * {x} + c * {x} ** 2", ("a", "b", "c"),
           "a quadratic in the primary input (Legendre 1805)"),
    Family("generic_exponential", "a * exp(b * ({x} - {xmin}))", ("a", "b"),
           "an exponential in the primary input (Malthus 1798, An Essay on the Principle of "
           "Population)"),
    Family("generic_log_linear", "a{each}", ("a", "b{i}"),
           "linear in the logarithm of every positive input (Gleason 1922, Ecology 3:158)",
           each=" + b{i} * log({xi})", each_positive=True),
)

CLAUSIUS = Family(
    "clausius_clapeyron", "A * exp(-B / ({x} + {T0}))", ("A", "B"),
    "Clausius 1850, Ueber die bewegende Kraft der Waerme, Ann. Phys. 79:368 (integrated "
    "Clausius-Clapeyron relation, constant latent heat)")
ANTOINE = Family(
    "antoine", "10 ** (A - B / (C + {x}))", ("A", "B", "C"),
    "Antoine 1888, Tensions des vapeurs: nouvelle relation entre les tensions et les "
    "temperatures, C. R. Acad. Sci. 107:681")
KIRCHHOFF = Family(
    "kirchhoff_rankine", "exp(A - B / ({x} + {T0}) - C * log({x} + {T0}))", ("A", "B", "C"),
    "Kirchhoff-Rankine vapour-pressure equation (latent heat linear in temperature), as in "
    + REID)

LOGISTIC = Family(
    "logistic", "K / (1 + exp(-r * ({x} - xm)))", ("K", "r", "xm"),
    "Verhulst 1838, Notice sur la loi que la population suit dans son accroissement, "
    "Corresp. Math. Phys. 10:113", local=("K",))
GOMPERTZ = Family(
    "gompertz", "K * exp(-exp(-r * ({x} - xm)))", ("K", "r", "xm"),
    "Gompertz 1825, On the nature of the function expressive of the law of human mortality, "
    "Phil. Trans. R. Soc. 115:513", local=("K",))
RICHARDS = Family(
    "richards", "K * (1 + v * exp(-r * ({x} - xm))) ** (-1 / v)", ("K", "r", "xm", "v"),
    "Richards 1959, A flexible growth function for empirical use, J. Exp. Bot. 10:290",
    local=("K",))
BERTALANFFY = Family(
    "von_bertalanffy", "K * (1 - exp(-r * ({x} - x0))) ** 3", ("K", "r", "x0"),
    "von Bertalanffy 1938, A quantitative theory of organic growth, Human Biology 10:181",
    local=("K",))
MONOMOLECULAR = Family(
    "monomolecular", "K - (K - y0) * exp(-r * ({x} - {xmin}))", ("K", "y0", "r"),
    "Brody 1945, Bioenergetics and Growth, Reinhold, New York (monomolecular growth)",
    local=("K",))

LL4 = Family(
    "log_logistic_4", "c + (d - c) / (1 + ({x} / ec50) ** b)", ("c", "d", "ec50", "b"),
    "Seefeldt, Jensen & Fuerst 1995, Log-logistic analysis of herbicide dose-response "
    "relationships, Weed Technol. 9:218; " + RITZ_2015, local=("d",))
LL3 = Family(
    "log_logistic_3", "d / (1 + ({x} / ec50) ** b)", ("d", "ec50", "b"), RITZ_2015,
    local=("d",))
WEIBULL4 = Family(
    "weibull_4", "c + (d - c) * exp(-({x} / ec50) ** b)", ("c", "d", "ec50", "b"),
    "Weibull 1951, A statistical distribution function of wide applicability, J. Appl. Mech. "
    "18:293; " + RITZ_2015, local=("d",))
PROBIT = Family(
    "log_probit_4", "c + (d - c) * (1 - erf(b * log({x} / ec50))) / 2", ("c", "d", "ec50", "b"),
    "Finney 1971, Probit Analysis, 3rd ed., Cambridge University Press", local=("d",))
LOGISTIC4 = Family(
    "logistic_4", "c + (d - c) / (1 + exp(b * ({x} - xm)))", ("c", "d", "xm", "b"),
    "Kent, Drane, Blumenstein & Manning 1972, A mathematical model to assess changes in the "
    "baroreceptor reflex, Cardiology 57:295; " + RITZ_2015, local=("d",))
BRAIN_COUSENS = Family(
    "brain_cousens", "c + (d - c + f * {x}) / (1 + ({x} / ec50) ** b)", ("c", "d", "f", "ec50", "b"),
    "Brain & Cousens 1989, An equation to describe dose responses where there is stimulation "
    "of growth at low doses, Weed Res. 29:93", local=("d",))
CEDERGREEN = Family(
    "cedergreen", "c + (d - c + f * exp(-1 / sqrt({x}))) / (1 + ({x} / ec50) ** b)",
    ("c", "d", "f", "ec50", "b"),
    "Cedergreen, Ritz & Streibig 2005, Improved empirical models describing hormesis, "
    "Environ. Toxicol. Chem. 24:3166", local=("d",), positive=("x",))
LOG_GAUSSIAN = Family(
    "log_gaussian", "c + a * exp(-(log({x} / xp) / w) ** 2)", ("c", "a", "xp", "w"),
    "log-normal (log-Gaussian) response peak, drc's lgaussian; " + RITZ_2015,
    local=("a",), positive=("x",))
GAUSSIAN = Family(
    "gaussian", "c + a * exp(-(({x} - xp) / w) ** 2)", ("c", "a", "xp", "w"),
    "Gaussian response peak, drc's gaussian; " + RITZ_2015, local=("a",))

FOUR_PL = Family(
    "four_pl_log", "c + (d - c) / (1 + exp((xm - log({x})) / s))", ("c", "d", "xm", "s"),
    "DeLean, Munson & Rodbard 1978, Simultaneous analysis of families of sigmoidal curves, "
    "Am. J. Physiol. 235:E97", local=("d",), positive=("x",))
FIVE_PL = Family(
    "five_pl_log", "c + (d - c) / (1 + exp((xm - log({x})) / s)) ** g", ("c", "d", "xm", "s", "g"),
    "Gottschalk & Dunn 2005, The five-parameter logistic: a characterization and comparison "
    "with the four-parameter logistic, Anal. Biochem. 343:54", local=("d",), positive=("x",))
HILL_EMAX = Family(
    "hill_emax", "E0 + Emax * {x} ** n / (EC50 ** n + {x} ** n)", ("E0", "Emax", "EC50", "n"),
    "Hill 1910, The possible effects of the aggregation of the molecules of haemoglobin on its "
    "dissociation curves, J. Physiol. 40:iv", local=("Emax",))
EMAX = Family(
    "emax", "E0 + Emax * {x} / (EC50 + {x})", ("E0", "Emax", "EC50"),
    "Holford & Sheiner 1981, Understanding the dose-effect relationship, Clin. Pharmacokinet. "
    "6:429", local=("Emax",))

MONOEXP = Family("monoexponential", "A * exp(-k * {x})", ("A", "k"),
                 GIBALDI + ", ch. 1 (one-compartment model)", local=("A",))
BIEXP = Family("biexponential", "A1 * exp(-k1 * {x}) + A2 * exp(-k2 * {x})",
               ("A1", "k1", "A2", "k2"), GIBALDI + ", ch. 2 (two-compartment model)",
               local=("A1", "A2"))
WISE_POWER = Family(
    "power_decay", "A * {x} ** (-b)", ("A", "b"),
    "Wise 1985, Negative power functions of time in pharmacokinetics and their implications, "
    "J. Pharmacokinet. Biopharm. 13:309", local=("A",), positive=("x",))
WISE_GAMMA = Family(
    "gamma_decay", "A * {x} ** (-b) * exp(-k * {x})", ("A", "b", "k"),
    "Wise 1985, J. Pharmacokinet. Biopharm. 13:309 (gamma-function curve)", local=("A",),
    positive=("x",))

BATEMAN = Family(
    "bateman", "{x1} * ka / (V * (ka - ke)) * (exp(-ke * {x}) - exp(-ka * {x}))",
    ("ka", "ke", "V"),
    "Bateman 1910, The solution of a system of differential equations occurring in the theory "
    "of radioactive transformations, Proc. Camb. Phil. Soc. 15:423; " + GIBALDI
    + " (one-compartment, first-order absorption)", local=("V",))
BATEMAN_LAG = Family(
    "bateman_lag",
    "{x1} * ka / (V * (ka - ke)) * (exp(-ke * max({x} - tlag, 0)) - exp(-ka * max({x} - tlag, 0)))",
    ("ka", "ke", "V", "tlag"), GIBALDI + " (first-order absorption after a lag time)",
    local=("V",))
GAMMA_VARIATE = Family(
    "gamma_variate", "{x1} * A * {x} ** a * exp(-{x} / tau)", ("A", "a", "tau"),
    "Thompson, Starmer, Whalen & McIntosh 1964, Indicator transit time considered as a gamma "
    "variate, Circ. Res. 14:502", local=("A",), positive=("x",))

MICHAELIS = Family(
    "michaelis_menten", "Vm * {x} / (K + {x})", ("Vm", "K"),
    "Michaelis & Menten 1913, Die Kinetik der Invertinwirkung, Biochem. Z. 49:333",
    local=("Vm",))
HILL = Family(
    "hill", "Vm * {x} ** n / (K ** n + {x} ** n)", ("Vm", "K", "n"),
    "Hill 1910, J. Physiol. 40:iv", local=("Vm",))
HALDANE = Family(
    "haldane", "Vm * {x} / (K + {x} + {x} ** 2 / Ki)", ("Vm", "K", "Ki"),
    "Haldane 1930, Enzymes, Longmans, Green (substrate inhibition)", local=("Vm",))

FIRST_ORDER = Family(
    "first_order_uptake", "a * (1 - exp(-k * {x}))", ("a", "k"),
    "first-order approach to equilibrium; Rawlings, Pantula & Dickey 1998, Applied Regression "
    "Analysis: A Research Tool, 2nd ed., Springer", local=("a",))
WEIBULL_UPTAKE = Family(
    "weibull_uptake", "a * (1 - exp(-({x} / tau) ** b))", ("a", "tau", "b"),
    "Weibull 1951, J. Appl. Mech. 18:293", local=("a",))

POWER_LAW = Family("power_law", "a * {x} ** b", ("a", "b"),
                   "Huxley 1932, Problems of Relative Growth, Methuen, London", local=("a",),
                   positive=("x",))
KLEIBER = Family("kleiber", "a * {x} ** 0.75", ("a",),
                 "Kleiber 1932, Body size and metabolism, Hilgardia 6:315", local=("a",),
                 positive=("x",))
RUBNER = Family("surface_law", "a * {x} ** (2 / 3)", ("a",),
                "Rubner 1883, Ueber den Einfluss der Koerpergroesse auf Stoff- und Kraftwechsel, "
                "Z. Biol. 19:535", local=("a",), positive=("x",))
GARLAND = Family(
    "quadratic_loglog", "10 ** (a + b * log10({x}) + c * log10({x}) ** 2)", ("a", "b", "c"),
    "Garland 1983, The relation between maximal running speed and body mass in terrestrial "
    "mammals, J. Zool. 199:157", local=("a",), positive=("x",))

ARRHENIUS_SA = Family("arrhenius_power", "c * {x} ** z", ("c", "z"),
                      "Arrhenius 1921, Species and area, J. Ecol. 9:95", positive=("x",))
GLEASON = Family("gleason_semilog", "a + b * log({x})", ("a", "b"),
                 "Gleason 1922, On the relation between species and area, Ecology 3:158",
                 positive=("x",))
MONOD_SA = Family("monod", "a * {x} / (b + {x})", ("a", "b"), TJORVE)
NEG_EXP_SA = Family("negative_exponential", "a * (1 - exp(-b * {x}))", ("a", "b"), TJORVE)

JOYNER_BOORE = Family(
    "joyner_boore", "A * exp(-k * sqrt({x} ** 2 + h ** 2)) / sqrt({x} ** 2 + h ** 2)",
    ("A", "k", "h"),
    "Joyner & Boore 1981, Peak horizontal acceleration and velocity from strong-motion records "
    "including records of the 1979 Imperial Valley, California, earthquake, Bull. Seismol. Soc. "
    "Am. 71:2011", local=("A",))
CAMPBELL = Family(
    "campbell_power", "A * ({x} + h) ** (-n)", ("A", "h", "n"),
    "Campbell 1981, Near-source attenuation of peak horizontal acceleration, Bull. Seismol. "
    "Soc. Am. 71:2039", local=("A",))
ANELASTIC = Family(
    "geometric_anelastic", "A * {x} ** (-n) * exp(-k * {x})", ("A", "n", "k"),
    "geometric spreading and anelastic attenuation; Aki & Richards 1980, Quantitative "
    "Seismology, W. H. Freeman", local=("A",), positive=("x",))

NEWTON = Family(
    "newton_relaxation", "c + A * exp(-k * ({x} - {xmin}))", ("c", "A", "k"),
    "Newton 1701, Scala graduum caloris, Phil. Trans. R. Soc. 22:824", local=("A",))
BIEXP_RELAX = Family(
    "biexponential_relaxation",
    "c + A1 * exp(-k1 * ({x} - {xmin})) + A2 * exp(-k2 * ({x} - {xmin}))",
    ("c", "A1", "k1", "A2", "k2"), GIBALDI + " (sum of exponentials, two compartments)",
    local=("A1",))
STRETCHED = Family(
    "stretched_exponential", "c + A * exp(-(({x} - {xmin}) / tau) ** beta)",
    ("c", "A", "tau", "beta"),
    "Williams & Watts 1970, Non-symmetrical dielectric relaxation behaviour arising from a "
    "simple empirical decay function, Trans. Faraday Soc. 66:80 (after Kohlrausch 1854)",
    local=("A",))
SECOND_ORDER = Family(
    "second_order_decay", "c + A / (1 + k * ({x} - {xmin}))", ("c", "A", "k"),
    "integrated second-order rate law; Atkins & de Paula 2006, Physical Chemistry, 8th ed., "
    "Oxford University Press", local=("A",))

WONG = "Wong 2001, Theory of Ground Vehicles, 3rd ed., Wiley"
REACTION_BRAKING = Family(
    "reaction_braking", "a * {x} + b * {x} ** 2", ("a", "b"),
    "reaction distance plus braking distance v**2 / (2 mu g); " + WONG
    + "; data: Ezekiel 1930, Methods of Correlation Analysis, Wiley")
BRAKING_ONLY = Family("braking_only", "b * {x} ** 2", ("b",),
                      "braking distance at constant deceleration; " + WONG)
BRAKING_DRAG = Family(
    "braking_with_drag", "a * {x} + b * log(1 + k * {x} ** 2)", ("a", "b", "k"),
    "braking against aerodynamic resistance (distance logarithmic in 1 + k v**2); " + WONG)

ACSM = Family(
    "acsm_linear", "a + b * {x}", ("a", "b"),
    "American College of Sports Medicine 2006, ACSM's Guidelines for Exercise Testing and "
    "Prescription, 7th ed., Lippincott Williams & Wilkins (leg ergometry equation)")
ZOLADZ_QUAD = Family(
    "slow_component_quadratic", "a + b * {x} + c * {x} ** 2", ("a", "b", "c"),
    "Zoladz, Rademaker & Sargeant 1995, Non-linear relationship between O2 uptake and power "
    "output at high intensities of exercise in humans, J. Physiol. 488:211")
ZOLADZ_POWER = Family(
    "rising_cost_power", "a + b * {x} ** p", ("a", "b", "p"),
    "Zoladz, Rademaker & Sargeant 1995, J. Physiol. 488:211 (oxygen cost rising with power)",
    positive=("x",))

PRAIS = ("Prais & Houthakker 1955, The Analysis of Family Budgets, Cambridge University "
         "Press")
ENGEL_POWER = Family("constant_elasticity", "a * {x} ** b", ("a", "b"), PRAIS,
                     positive=("x",))
WORKING_LESER = Family(
    "working_leser", "{x} * (a + b * log({x}))", ("a", "b"),
    "Working 1943, Statistical laws of family expenditure, J. Am. Stat. Assoc. 38:43; Leser "
    "1963, Forms of Engel functions, Econometrica 31:694", positive=("x",))
ENGEL_SEMILOG = Family("engel_semilog", "a + b * log({x})", ("a", "b"), PRAIS,
                       positive=("x",))
QUAIDS = Family(
    "quadratic_engel", "{x} * (a + b * log({x}) + c * log({x}) ** 2)", ("a", "b", "c"),
    "Banks, Blundell & Lewbel 1997, Quadratic Engel curves and consumer demand, Rev. Econ. "
    "Stat. 79:527", positive=("x",))

FORM_FACTOR = Family("form_factor", "f * {x} ** 2 * {x1}", ("f",), SPURR + " (form factor)")
COMBINED_VARIABLE = Family("combined_variable", "a + b * {x} ** 2 * {x1}", ("a", "b"),
                           SPURR + " (combined-variable equation)")
SCHUMACHER_HALL = Family(
    "schumacher_hall", "a * {x} ** b * {x1} ** c", ("a", "b", "c"),
    "Schumacher & Hall 1933, Logarithmic expression of timber-tree volume, J. Agric. Res. "
    "47:719", positive=("x", "x1"))

NAISMITH = Family(
    "naismith", "a * {x} + b * {x1}", ("a", "b"),
    "Naismith's rule (W. W. Naismith 1892); the hill-race regression of Atkinson 1986, "
    "Statistical Science 1:397")
RIEGEL = Family(
    "riegel_power", "a * {x} ** p", ("a", "p"),
    "Riegel 1981, Athletic records and human endurance, American Scientist 69:285",
    positive=("x",))
RIEGEL_NAISMITH = Family(
    "riegel_naismith", "a * {x} ** p + b * {x1}", ("a", "p", "b"),
    "Riegel 1981, American Scientist 69:285, with Naismith's climb term", positive=("x",))

COSINOR = Family(
    "cosinor", "M + A * cos(2 * pi * ({x} - phi))", ("M", "A", "phi"),
    "Nelson, Tong, Lee & Halberg 1979, Methods for cosinor-rhythmometry, Chronobiologia "
    "6:305 (input in cycles)", local=("M",))
TWO_HARMONICS = Family(
    "two_harmonics",
    "M + a1 * sin(2 * pi * {x}) + b1 * cos(2 * pi * {x}) + a2 * sin(4 * pi * {x}) "
    "+ b2 * cos(4 * pi * {x})", ("M", "a1", "b1", "a2", "b2"), HARMONIC, local=("M",))
FREE_PERIOD = Family(
    "cosinor_free_period", "M + a * sin(2 * pi * {x} / P) + b * cos(2 * pi * {x} / P)",
    ("M", "a", "b", "P"), "Nelson, Tong, Lee & Halberg 1979, Chronobiologia 6:305",
    local=("M",))

LINEAR_SEASONAL = Family(
    "linear_seasonal", "c0 + c1 * ({x} - {xmin}) + " + SEASON, ("c0", "c1", "a1", "b1"), KEELING)
QUADRATIC_SEASONAL = Family(
    "quadratic_seasonal", "c0 + c1 * ({x} - {xmin}) + c2 * ({x} - {xmin}) ** 2 + " + SEASON,
    ("c0", "c1", "c2", "a1", "b1"), KEELING)
THONING = Family(
    "quadratic_two_harmonics",
    "c0 + c1 * ({x} - {xmin}) + c2 * ({x} - {xmin}) ** 2 + " + SEASON
    + " + a2 * sin(4 * pi * {x}) + b2 * cos(4 * pi * {x})",
    ("c0", "c1", "c2", "a1", "b1", "a2", "b2"),
    "Thoning, Tans & Komhyr 1989, Atmospheric carbon dioxide at Mauna Loa Observatory 2, "
    "J. Geophys. Res. 94:8549")
EXP_SEASONAL = Family(
    "exponential_seasonal", "c0 + c1 * exp(r * ({x} - {xmin})) + " + SEASON,
    ("c0", "c1", "r", "a1", "b1"),
    "Hofmann, Butler & Tans 2009, A new look at atmospheric carbon dioxide, Atmos. Environ. "
    "43:2084")

PARIS = Family(
    "paris_integrated", "(1 - (m - 1) * C * {x}) ** (-1 / (m - 1))", ("m", "C"),
    "Paris & Erdogan 1963, A critical analysis of crack propagation laws, J. Basic Eng. 85:528 "
    "(integrated for a crack length relative to its initial length)", local=("C",))
PARIS_FREE = Family(
    "paris_free_start", "a0 * (1 - (m - 1) * C * {x}) ** (-1 / (m - 1))", ("a0", "m", "C"),
    "Paris & Erdogan 1963, J. Basic Eng. 85:528 (initial length free)", local=("C",))
FROST_DUGDALE = Family(
    "frost_dugdale", "exp(k * {x})", ("k",),
    "Frost & Dugdale 1958, The propagation of fatigue cracks in sheet specimens, J. Mech. Phys. "
    "Solids 6:92 (growth rate proportional to length)", local=("k",))

SHOCKLEY = Family(
    "square_law", "k * max({x} - Vt, 0) ** 2", ("k", "Vt"),
    "Shockley 1952, A unipolar field-effect transistor, Proc. IRE 40:1365", local=("k",))
SAKURAI = Family(
    "alpha_power", "k * max({x} - Vt, 0) ** alpha", ("k", "Vt", "alpha"),
    "Sakurai & Newton 1990, Alpha-power law MOSFET model and its applications to CMOS inverter "
    "delay and other formulas, IEEE J. Solid-State Circuits 25:584", local=("k",))
MOBILITY = Family(
    "mobility_degradation", "k * max({x} - Vt, 0) ** 2 / (1 + theta * max({x} - Vt, 0))",
    ("k", "Vt", "theta"),
    "Sze 1981, Physics of Semiconductor Devices, 2nd ed., Wiley (mobility degradation)",
    local=("k",))

KINDS: dict[str, tuple[Family, ...]] = {
    "vapour_pressure": (CLAUSIUS, ANTOINE, KIRCHHOFF),
    "growth": (LOGISTIC, GOMPERTZ, RICHARDS, BERTALANFFY, MONOMOLECULAR),
    "dose_response": (LL4, LL3, WEIBULL4, PROBIT, LOGISTIC4, BRAIN_COUSENS),
    "bioassay": (FOUR_PL, FIVE_PL, HILL_EMAX, EMAX),
    "biphasic_response": (LOG_GAUSSIAN, GAUSSIAN, BRAIN_COUSENS, CEDERGREEN),
    "pharmacokinetics_iv": (MONOEXP, BIEXP, WISE_POWER, WISE_GAMMA),
    "pharmacokinetics_oral": (BATEMAN, BATEMAN_LAG, GAMMA_VARIATE),
    "enzyme_kinetics": (MICHAELIS, HILL, HALDANE),
    "uptake_kinetics": (FIRST_ORDER, MICHAELIS, WEIBULL_UPTAKE),
    "allometry": (POWER_LAW, KLEIBER, RUBNER, GARLAND),
    "species_area": (ARRHENIUS_SA, GLEASON, MONOD_SA, NEG_EXP_SA),
    "attenuation": (JOYNER_BOORE, CAMPBELL, ANELASTIC),
    "exponential_relaxation": (NEWTON, BIEXP_RELAX, STRETCHED, SECOND_ORDER),
    "stopping_distance": (REACTION_BRAKING, BRAKING_ONLY, BRAKING_DRAG),
    "exercise_energetics": (ACSM, ZOLADZ_QUAD, ZOLADZ_POWER),
    "engel_curve": (ENGEL_POWER, WORKING_LESER, ENGEL_SEMILOG, QUAIDS),
    "tree_volume": (FORM_FACTOR, COMBINED_VARIABLE, SCHUMACHER_HALL),
    "race_time": (NAISMITH, RIEGEL, RIEGEL_NAISMITH),
    "periodic": (COSINOR, TWO_HARMONICS, FREE_PERIOD),
    "trend_seasonal": (LINEAR_SEASONAL, QUADRATIC_SEASONAL, THONING, EXP_SEASONAL),
    "crack_growth": (PARIS, PARIS_FREE, FROST_DUGDALE),
    "mosfet": (SHOCKLEY, SAKURAI, MOBILITY),
}

KIND_OF: dict[str, str] = {
    "alga_cadmium": "dose_response",
    "brain_body_allometry": "allometry",
    "calcium_uptake": "uptake_kinetics",
    "capacitor_discharge": "exponential_relaxation",
    "car_stopping_distance": "stopping_distance",
    "cefamandole_pk": "pharmacokinetics_iv",
    "cherry_tree_volume": "tree_volume",
    "chick_growth": "growth",
    "cycling_oxygen_uptake": "exercise_energetics",
    "dnase_elisa": "bioassay",
    "earthquake_attenuation": "attenuation",
    "engel_food_expenditure": "engel_curve",
    "forbes_boiling_point": "vapour_pressure",
    "gag_urine_age": "exponential_relaxation",
    "heart_rate_baroreflex": "dose_response",
    "hill_race_times": "race_time",
    "indomethacin_pk": "pharmacokinetics_iv",
    "island_species_area": "species_area",
    "mammal_running_speed": "allometry",
    "mare_follicles": "periodic",
    "mauna_loa_co2": "trend_seasonal",
    "mercury_vapour_pressure": "vapour_pressure",
    "metal_biosensor_induction": "biphasic_response",
    "metal_fatigue_crack": "crack_growth",
    "mustard_glyphosate": "dose_response",
    "mysid_effluent": "dose_response",
    "newton_cooling": "exponential_relaxation",
    "obese_weight_loss": "exponential_relaxation",
    "pig_growth": "growth",
    "puromycin_enzyme_kinetics": "enzyme_kinetics",
    "rat_body_weight": "growth",
    "relaxin_bioassay": "bioassay",
    "ryegrass_ferulic_acid": "dose_response",
    "soybean_growth": "growth",
    "spinach_photosynthesis": "dose_response",
    "spruce_growth": "growth",
    "steam_saturation_pressure": "vapour_pressure",
    "terbuthylazin_growth_rate": "dose_response",
    "theophylline_pk": "pharmacokinetics_oral",
    "us_population_growth": "growth",
    "wafer_transistor_current": "mosfet",
}

# the absolute zero of the primary input's temperature scale ({T0}), per task whose
# kind needs an absolute temperature (degC: 273.15, degF: 459.67)
ABSOLUTE_ZERO: dict[str, float] = {
    "forbes_boiling_point": 459.67,
    "mercury_vapour_pressure": 273.15,
    "steam_saturation_pressure": 273.15,
}
UNIT_ZERO = {"degC": 273.15, "degF": 459.67, "K": 0.0}


# ---- templates ----------------------------------------------------------------------------

def placeholder(i: int) -> str:
    """The template name of the task's i-th input (0: ``x``, then ``x1``, ``x2`` ...)."""
    return "x" if i == 0 else f"x{i}"


def _positive(v: np.ndarray) -> bool:
    v = np.asarray(v, dtype=float)
    return bool(v.size) and bool(np.all(np.isfinite(v) & (v > 0)))


def applicable(family: Family, x: Mapping[str, np.ndarray]) -> bool:
    """Whether ``family`` applies to data ``x`` (keyed by placeholder): every input it
    names exists, the ones it needs positive are, and a repeated term has an input."""
    used = set(re.findall(r"\{(x\d*)\}", family.expr))
    if not used <= set(x) or not all(_positive(x[p]) for p in family.positive):
        return False
    return not family.each or bool(_each_inputs(family, x))


def _each_inputs(family: Family, x: Mapping[str, np.ndarray]) -> list[str]:
    return [p for p in x if not family.each_positive or _positive(x[p])]


def expand(family: Family, x: Mapping[str, np.ndarray]) -> tuple[str, list[str]]:
    """The template with its repeated term written out for the inputs of ``x``, and
    the family's constants in order."""
    if not family.each:
        return family.expr, list(family.params)
    eligible = _each_inputs(family, x)
    terms = "".join(family.each.replace("{i}", str(i)).replace("{xi}", "{" + p + "}")
                    for i, p in enumerate(eligible, start=1))
    params: list[str] = []
    for p in family.params:
        params.extend([p.replace("{i}", str(i)) for i in range(1, len(eligible) + 1)]
                      if "{i}" in p else [p])
    return family.expr.replace("{each}", terms), params


def _number(v: float) -> str:
    return repr(v) if v >= 0 else f"({v!r})"


def _fill(template: str, names: Mapping[str, str], xmin: float, t0: float) -> str:
    if xmin == 0:
        template = template.replace(" - {xmin}", "")
    text = template.replace("{xmin}", _number(xmin)).replace("{T0}", _number(t0))
    text = text.replace("{x0}", "{x}")
    return re.sub(r"\{(x\d*)\}", lambda m: names[m.group(1)], text)


def _rename(template: str, mapping: Mapping[str, str]) -> str:
    """Rename constants in a template, leaving ``{placeholders}`` and calls alone."""
    return re.sub(r"(?<![\w{.])([A-Za-z_]\w*)(?![\w}(])",
                  lambda m: mapping.get(m.group(1), m.group(1)), template)


def _evaluator(family: Family, x: Mapping[str, np.ndarray], t0: float
               ) -> tuple[Expression, list[str]]:
    template, params = expand(family, x)
    xmin = float(np.min(x["x"]))
    return Expression(_fill(template, {p: p for p in x}, xmin, t0)), params


# ---- starting values ----------------------------------------------------------------------

Guess = Callable[[Mapping[str, np.ndarray], np.ndarray, float], dict[str, float]]
_GUESSES: dict[str, Guess] = {}


def _guess(*names: str) -> Callable[[Guess], Guess]:
    def register(fn: Guess) -> Guess:
        for n in names:
            _GUESSES[n] = fn
        return fn
    return register


def _lstsq(cols: Sequence[np.ndarray], target: np.ndarray) -> tuple[np.ndarray, float]:
    """Least squares of ``target`` on ``cols`` over the finite rows: (coefficients, SSE)."""
    a = np.column_stack([np.broadcast_to(np.asarray(c, float), target.shape) for c in cols])
    ok = np.all(np.isfinite(a), axis=1) & np.isfinite(target)
    if ok.sum() < a.shape[1]:
        return np.full(a.shape[1], np.nan), np.inf
    coef, *_ = np.linalg.lstsq(a[ok], target[ok], rcond=None)
    return coef, float(np.sum((a[ok] @ coef - target[ok]) ** 2))


def _profile(grid: np.ndarray | Sequence[float], cols: Callable[[float], Sequence[np.ndarray]],
             target: np.ndarray) -> tuple[float, np.ndarray]:
    """The value of one nonlinear constant on ``grid`` whose linear least squares (the
    other constants) fits best: (value, coefficients)."""
    best: tuple[float, float, np.ndarray] = (np.inf, float(grid[0]), np.zeros(0))
    with np.errstate(all="ignore"):
        for v in grid:
            coef, sse = _lstsq(cols(float(v)), target)
            if np.all(np.isfinite(coef)) and sse < best[0]:
                best = (sse, float(v), coef)
    return best[1], best[2]


def _span(v: np.ndarray) -> float:
    return float(np.ptp(v)) or 1.0


def _rates(x: np.ndarray, lo: float = 0.01, hi: float = 30.0, n: int = 80) -> np.ndarray:
    return np.geomspace(lo, hi, n) / _span(x)


def _ends(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean response at the lowest and at the highest values of ``x``."""
    order = np.argsort(x, kind="stable")
    k = max(2, len(x) // 6)
    return float(np.mean(y[order[:k]])), float(np.mean(y[order[-k:]]))


def _sigmoid(u: np.ndarray, y: np.ndarray, first: float, last: float) -> tuple[float, float]:
    """For y = last + (first - last) / (1 + exp(b (u - u50))): (b, u50) by the
    logit of y between its two ends."""
    spread = first - last
    if spread == 0:
        return 1.0, float(np.median(u))
    r = (y - last) / spread
    z = np.log((1 - np.clip(r, 0.02, 0.98)) / np.clip(r, 0.02, 0.98))
    ok = np.isfinite(u) & (r > 0.05) & (r < 0.95)
    if ok.sum() < 2 or np.ptp(u[ok]) == 0:
        ok = np.isfinite(u)
    coef, _ = _lstsq([np.ones(ok.sum()), u[ok]], z[ok])
    b = float(coef[1]) if np.isfinite(coef[1]) and abs(coef[1]) > 1e-12 else 1.0 / _span(u[ok])
    u50 = -float(coef[0]) / b if np.isfinite(coef[0]) else float(np.median(u[ok]))
    return b, u50


def _widened(first: float, last: float, by: float = 0.05) -> tuple[float, float]:
    d = by * (first - last)
    return first + d, last - d


def _sigmoid_start(x: np.ndarray, y: np.ndarray, log_x: bool, floor: bool = True
                   ) -> dict[str, float]:
    first, last = _widened(*_ends(x, y))
    if not floor:
        last = 0.0
    u = np.log(np.where(x > 0, x, np.nan)) if log_x else x
    b, u50 = _sigmoid(u, y, first, last)
    return {"d": first, "c": last, "b": b, "u50": u50}


def _log_sigmoid(x: np.ndarray, y: np.ndarray, floor: bool) -> dict[str, float]:
    g = _sigmoid_start(x, y, True, floor)
    return {"c": g["c"], "d": g["d"], "ec50": float(np.exp(g["u50"])), "b": g["b"]}


@_guess("log_logistic_4")
def _g_ll(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    return _log_sigmoid(x["x"], y, True)


@_guess("log_logistic_3")
def _g_ll3(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    return _log_sigmoid(x["x"], y, False)


@_guess("brain_cousens", "cedergreen")
def _g_brain_cousens(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    g = _log_sigmoid(x["x"], y, True)
    peak = float(x["x"][np.argmax(y)])
    if peak > 0 and np.max(y) > max(g["d"], g["c"]):  # a rise before the fall
        return {"c": g["c"], "d": g["d"], "f": 2 * (float(np.max(y)) - g["d"]) / peak,
                "ec50": 2 * peak, "b": 2.0}
    return {**g, "f": 0.0}


@_guess("weibull_4")
def _g_weibull(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    first, last = _widened(*_ends(x["x"], y))
    r = np.clip((y - last) / (first - last), 0.02, 0.98)
    u = np.log(np.where(x["x"] > 0, x["x"], np.nan))
    coef, _ = _lstsq([np.ones_like(u), u], np.log(-np.log(r)))
    b = float(coef[1]) if np.isfinite(coef[1]) and coef[1] != 0 else 1.0
    return {"c": last, "d": first, "b": b,
            "ec50": float(np.exp(-coef[0] / b)) if np.isfinite(coef[0]) else float(np.median(x["x"]))}


@_guess("log_probit_4")
def _g_probit(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    g = _log_sigmoid(x["x"], y, True)
    return {**g, "b": g["b"] / 2.407}  # logistic slope -> probit's, in erf units


@_guess("logistic_4")
def _g_logistic4(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    g = _sigmoid_start(x["x"], y, False)
    return {"c": g["c"], "d": g["d"], "b": g["b"], "xm": g["u50"]}


@_guess("four_pl_log", "five_pl_log")
def _g_four_pl(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    g = _sigmoid_start(x["x"], y, True)
    # c + (d - c) / (1 + exp((xm - u) / s)): c the low-x end, d the high-x end
    return {"c": g["d"], "d": g["c"], "xm": g["u50"], "s": 1 / g["b"], "g": 1.0}


@_guess("hill_emax", "emax")
def _g_emax(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    g = _sigmoid_start(x["x"], y, True)
    return {"E0": g["d"], "Emax": g["c"] - g["d"], "EC50": float(np.exp(g["u50"])),
            "n": g["b"]}


def _peak(x: Mapping[str, np.ndarray], y: np.ndarray, log_x: bool) -> dict[str, float]:
    u = np.log(x["x"]) if log_x else x["x"]
    c = min(_ends(x["x"], y))
    i = int(np.argmax(y))
    above = u[y - c > (y[i] - c) / 2]
    w = float(np.ptp(above)) / 1.665 if above.size > 1 else _span(u) / 4
    return {"c": c, "a": float(y[i]) - c, "xp": float(x["x"][i]), "w": w or _span(u) / 4}


@_guess("log_gaussian")
def _g_log_gaussian(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    return _peak(x, y, True)


@_guess("gaussian")
def _g_gaussian(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    return _peak(x, y, False)


def _asymptotes(y: np.ndarray) -> np.ndarray:
    top = float(np.max(y))
    return top * np.array([1.01, 1.03, 1.06, 1.1, 1.2, 1.35, 1.5, 1.75, 2, 2.5, 3, 4, 6, 10])


def _profile_ratio(x: np.ndarray, y: np.ndarray, link: Callable[[np.ndarray], np.ndarray],
                   inverse: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float, float]:
    """Asymptote K, and slope and intercept of link(y / K) linear in x, K chosen by
    the residual of the curve in y (the sigmoids of growth)."""
    best = (np.inf, 1.0, 0.0, 0.0)
    with np.errstate(all="ignore"):
        for k in _asymptotes(y):
            z = link(np.clip(y / k, 1e-6, 1 - 1e-6))
            coef, _ = _lstsq([np.ones_like(x), x], z)
            if not np.all(np.isfinite(coef)):
                continue
            sse = float(np.sum((k * inverse(coef[0] + coef[1] * x) - y) ** 2))
            if sse < best[0]:
                best = (sse, float(k), float(coef[1]), float(coef[0]))
    return best[1], best[2], best[3]


@_guess("logistic", "richards")
def _g_logistic(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    k, r, a = _profile_ratio(x["x"], y, lambda p: np.log(p / (1 - p)),
                             lambda z: 1 / (1 + np.exp(-z)))
    r = r if r != 0 else 1 / _span(x["x"])
    return {"K": k, "r": r, "xm": -a / r, "v": 1.0}


@_guess("gompertz")
def _g_gompertz(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    k, r, a = _profile_ratio(x["x"], y, lambda p: -np.log(-np.log(p)),
                             lambda z: np.exp(-np.exp(-z)))
    r = r if r != 0 else 1 / _span(x["x"])
    return {"K": k, "r": r, "xm": -a / r}


@_guess("von_bertalanffy")
def _g_bertalanffy(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    # (y / K)^(1/3) = 1 - exp(-r (x - x0)): -log(1 - (y/K)^(1/3)) = r x - r x0
    k, r, a = _profile_ratio(x["x"], y, lambda p: -np.log(1 - np.cbrt(p)),
                             lambda z: (1 - np.exp(-z)) ** 3)
    r = r if r != 0 else 1 / _span(x["x"])
    return {"K": k, "r": r, "x0": -a / r}


@_guess("monomolecular")
def _g_monomolecular(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    g = _relaxation(x, y)
    return {"K": g["c"], "y0": g["c"] + g["A"], "r": g["k"]}


def _relaxation(x: Mapping[str, np.ndarray], y: np.ndarray) -> dict[str, float]:
    """c + A exp(-k (x - xmin)): k profiled, c and A by least squares."""
    s = x["x"] - np.min(x["x"])
    k, coef = _profile(_rates(s, 0.05, 50.0, 120), lambda k: [np.ones_like(s), np.exp(-k * s)], y)
    if coef.size == 0:
        return {"c": float(np.mean(y)), "A": 0.0, "k": 1 / _span(s)}
    return {"c": float(coef[0]), "A": float(coef[1]), "k": k}


@_guess("newton_relaxation")
def _g_newton(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    return _relaxation(x, y)


@_guess("biexponential_relaxation")
def _g_biexp_relax(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    g = _relaxation(x, y)
    return {"c": g["c"], "A1": g["A"] / 2, "k1": 3 * g["k"], "A2": g["A"] / 2, "k2": g["k"] / 2}


@_guess("stretched_exponential")
def _g_stretched(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    g = _relaxation(x, y)
    return {"c": g["c"], "A": g["A"], "tau": 1 / g["k"], "beta": 1.0}


@_guess("second_order_decay")
def _g_second_order(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    s = x["x"] - np.min(x["x"])
    k, coef = _profile(_rates(s, 0.05, 100.0, 120), lambda k: [np.ones_like(s), 1 / (1 + k * s)], y)
    return {"c": float(coef[0]), "A": float(coef[1]), "k": k}


def _log_linear(cols: Sequence[np.ndarray], y: np.ndarray) -> np.ndarray:
    """Least squares of log y (the positive rows) on ``cols``."""
    with np.errstate(all="ignore"):
        ly = np.log(np.where(y > 0, y, np.nan))
    coef, _ = _lstsq(cols, ly)
    return np.where(np.isfinite(coef), coef, 0.0)


@_guess("clausius_clapeyron")
def _g_clausius(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    t = x["x"] + t0
    c = _log_linear([np.ones_like(t), 1 / t], y)
    return {"A": float(np.exp(c[0])), "B": -float(c[1])}


@_guess("kirchhoff_rankine")
def _g_kirchhoff(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    t = x["x"] + t0
    c = _log_linear([np.ones_like(t), 1 / t, np.log(t)], y)
    return {"A": float(c[0]), "B": -float(c[1]), "C": -float(c[2])}


@_guess("antoine")
def _g_antoine(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    v = x["x"]
    with np.errstate(all="ignore"):
        ly = np.log10(np.where(y > 0, y, np.nan))
    grid = -float(np.min(v)) + _span(v) * np.geomspace(0.02, 50.0, 200)
    c, coef = _profile(grid, lambda c: [np.ones_like(v), 1 / (c + v)], ly)
    return {"A": float(coef[0]), "B": -float(coef[1]), "C": c}


@_guess("monoexponential")
def _g_monoexp(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    c = _log_linear([np.ones_like(x["x"]), x["x"]], y)
    return {"A": float(np.exp(c[0])), "k": -float(c[1])}


@_guess("biexponential")
def _g_biexp(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    """Curve stripping: the terminal phase from the later half, the fast phase from
    what is left at early times."""
    t = x["x"]
    late = t >= np.median(t)
    c2 = _log_linear([np.ones(late.sum()), t[late]], y[late])
    a2, k2 = float(np.exp(c2[0])), max(-float(c2[1]), 1e-3 / _span(t))
    rest = y - a2 * np.exp(-k2 * t)
    early = ~late & (rest > 0)
    if early.sum() >= 2:
        c1 = _log_linear([np.ones(early.sum()), t[early]], rest[early])
        a1, k1 = float(np.exp(c1[0])), -float(c1[1])
    else:
        a1, k1 = a2, 5 * k2
    if not k1 > 1.5 * k2:
        k1 = 5 * k2
    return {"A1": a1, "k1": k1, "A2": a2, "k2": k2}


@_guess("power_decay")
def _g_power_decay(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    c = _log_linear([np.ones_like(x["x"]), np.log(x["x"])], y)
    return {"A": float(np.exp(c[0])), "b": -float(c[1])}


@_guess("gamma_decay")
def _g_gamma_decay(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    t = x["x"]
    c = _log_linear([np.ones_like(t), np.log(t), t], y)
    return {"A": float(np.exp(c[0])), "b": -float(c[1]), "k": -float(c[2])}


@_guess("bateman", "bateman_lag")
def _g_bateman(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    """ke and ka profiled on a grid (ka > ke); 1/V then linear."""
    t, dose = x["x"], x["x1"]
    best = (np.inf, 1.0, 2.0, 1.0)
    with np.errstate(all="ignore"):
        for ke in _rates(t, 0.05, 20.0, 30):
            for ka in ke * np.geomspace(1.2, 200.0, 30):
                col = dose * ka / (ka - ke) * (np.exp(-ke * t) - np.exp(-ka * t))
                coef, sse = _lstsq([col], y)
                if np.isfinite(coef[0]) and coef[0] > 0 and sse < best[0]:
                    best = (sse, float(ke), float(ka), float(coef[0]))
    pos = t[t > 0]
    return {"ke": best[1], "ka": best[2], "V": 1 / best[3],
            "tlag": 0.5 * float(np.min(pos)) if pos.size else 0.0}


@_guess("gamma_variate")
def _g_gamma_variate(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    t = x["x"]
    c = _log_linear([np.ones_like(t), np.log(t), t], y / x["x1"])
    rate = -float(c[2])
    return {"A": float(np.exp(c[0])), "a": float(c[1]),
            "tau": 1 / rate if rate > 0 else _span(t)}


def _hyperbola(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Vm x / (K + x): K profiled, Vm by least squares."""
    scale = float(np.max(np.abs(x))) or 1.0
    k, coef = _profile(scale * np.geomspace(1e-3, 100.0, 150), lambda k: [x / (k + x)], y)
    return float(coef[0]), k


@_guess("michaelis_menten", "hill", "haldane")
def _g_michaelis(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    vm, k = _hyperbola(x["x"], y)
    return {"Vm": vm, "K": k, "n": 1.0, "Ki": 100 * float(np.max(np.abs(x["x"])) or 1.0)}


@_guess("monod")
def _g_monod(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    a, b = _hyperbola(x["x"], y)
    return {"a": a, "b": b}


def _saturation(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """a (1 - exp(-k x)): k profiled, a by least squares."""
    k, coef = _profile(_rates(np.append(x, 0.0), 0.01, 50.0, 150),
                       lambda k: [1 - np.exp(-k * x)], y)
    return float(coef[0]), k


@_guess("first_order_uptake", "weibull_uptake")
def _g_first_order(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    a, k = _saturation(x["x"], y)
    return {"a": a, "k": k, "tau": 1 / k, "b": 1.0}


@_guess("negative_exponential")
def _g_neg_exp(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    a, k = _saturation(x["x"], y)
    return {"a": a, "b": k}


def _power(v: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    c = _log_linear([np.ones_like(v), np.log(v)], y)
    return float(np.exp(c[0])), float(c[1])


@_guess("power_law", "constant_elasticity")
def _g_power(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    a, b = _power(x["x"], y)
    return {"a": a, "b": b}


@_guess("arrhenius_power")
def _g_arrhenius_sa(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    c, z = _power(x["x"], y)
    return {"c": c, "z": z}


@_guess("riegel_power")
def _g_riegel(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    a, p = _power(x["x"], y)
    return {"a": a, "p": p}


@_guess("riegel_naismith")
def _g_riegel_naismith(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    d, c = x["x"], x["x1"]
    p, coef = _profile(np.linspace(0.5, 2.0, 61), lambda p: [d ** p, c], y)
    return {"a": float(coef[0]), "p": p, "b": float(coef[1])}


@_guess("quadratic_loglog")
def _g_garland(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    u = np.log10(x["x"])
    c = _log_linear([np.ones_like(u), u, u ** 2], y) / np.log(10)
    return {"a": float(c[0]), "b": float(c[1]), "c": float(c[2])}


@_guess("rising_cost_power")
def _g_rising_cost(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    v = x["x"]
    p, coef = _profile(np.geomspace(0.2, 5.0, 80), lambda p: [np.ones_like(v), v ** p], y)
    return {"a": float(coef[0]), "b": float(coef[1]), "p": p}


@_guess("schumacher_hall")
def _g_schumacher(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    c = _log_linear([np.ones_like(x["x"]), np.log(x["x"]), np.log(x["x1"])], y)
    return {"a": float(np.exp(c[0])), "b": float(c[1]), "c": float(c[2])}


@_guess("joyner_boore")
def _g_joyner_boore(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    d = x["x"]
    with np.errstate(all="ignore"):
        ly = np.log(np.where(y > 0, y, np.nan))

    def cols(h: float) -> list[np.ndarray]:
        return [np.ones_like(d), -np.sqrt(d ** 2 + h ** 2)]

    def target(h: float) -> np.ndarray:
        return ly + np.log(np.sqrt(d ** 2 + h ** 2))

    best = (np.inf, 1.0, np.zeros(2))
    for h in _span(d) * np.geomspace(1e-3, 1.0, 60):
        coef, sse = _lstsq(cols(h), target(h))
        if np.all(np.isfinite(coef)) and sse < best[0]:
            best = (sse, float(h), coef)
    return {"A": float(np.exp(best[2][0])), "k": float(best[2][1]), "h": best[1]}


@_guess("campbell_power")
def _g_campbell(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    d = x["x"]
    with np.errstate(all="ignore"):
        ly = np.log(np.where(y > 0, y, np.nan))
    grid = -float(np.min(d)) + _span(d) * np.geomspace(1e-3, 2.0, 80)
    h, coef = _profile(grid, lambda h: [np.ones_like(d), -np.log(d + h)], ly)
    return {"A": float(np.exp(coef[0])), "h": h, "n": float(coef[1])}


@_guess("geometric_anelastic")
def _g_anelastic(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    d = x["x"]
    c = _log_linear([np.ones_like(d), -np.log(d), -d], y)
    return {"A": float(np.exp(c[0])), "n": float(c[1]), "k": float(c[2])}


@_guess("braking_with_drag")
def _g_braking_drag(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    v = x["x"]
    scale = float(np.max(np.abs(v))) or 1.0
    k, coef = _profile(np.geomspace(1e-3, 10.0, 80) / scale ** 2,
                       lambda k: [v, np.log(1 + k * v ** 2)], y)
    return {"a": float(coef[0]), "b": float(coef[1]), "k": k}


@_guess("cosinor")
def _g_cosinor(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    w = 2 * np.pi * x["x"]
    c, _ = _lstsq([np.ones_like(w), np.sin(w), np.cos(w)], y)
    # M + A cos(w - 2 pi phi) = M + A cos(2 pi phi) cos w + A sin(2 pi phi) sin w
    return {"M": float(c[0]), "A": float(np.hypot(c[1], c[2])),
            "phi": float(np.arctan2(c[1], c[2]) / (2 * np.pi))}


@_guess("cosinor_free_period")
def _g_free_period(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    v = x["x"]
    p, c = _profile(np.linspace(0.5, 2.0, 151),
                    lambda p: [np.ones_like(v), np.sin(2 * np.pi * v / p), np.cos(2 * np.pi * v / p)], y)
    return {"M": float(c[0]), "a": float(c[1]), "b": float(c[2]), "P": p}


@_guess("exponential_seasonal")
def _g_exp_seasonal(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    v = x["x"]
    s, w = v - np.min(v), 2 * np.pi * v
    r, c = _profile(_rates(s, 0.05, 10.0, 80),
                    lambda r: [np.ones_like(v), np.exp(r * s), np.sin(w), np.cos(w)], y)
    return {"c0": float(c[0]), "c1": float(c[1]), "r": r, "a1": float(c[2]), "b1": float(c[3])}


@_guess("paris_integrated", "paris_free_start")
def _g_paris(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    # m = 2: y = 1 / (1 - C x), so 1 - 1/y = C x
    v = x["x"]
    c, _ = _lstsq([v], 1 - 1 / np.where(y != 0, y, np.nan))
    top = float(np.max(np.abs(v))) or 1.0
    cc = float(np.clip(c[0], 1e-6 / top, 0.9 / top)) if np.isfinite(c[0]) else 0.1 / top
    return {"m": 2.0, "C": cc, "a0": 1.0}


@_guess("frost_dugdale")
def _g_frost_dugdale(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    c = _log_linear([x["x"]], y)
    return {"k": float(c[0])}


@_guess("square_law", "alpha_power", "mobility_degradation")
def _g_square_law(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    v = x["x"]
    c, _ = _lstsq([np.ones_like(v), v], np.sqrt(np.clip(y, 0, None)))
    slope = float(c[1]) if np.isfinite(c[1]) and c[1] != 0 else 1.0
    vt = -float(c[0]) / slope
    vt = min(vt, float(np.min(v)) - 0.05 * _span(v))
    return {"k": slope ** 2, "Vt": vt, "alpha": 2.0, "theta": 0.0}


@_guess("generic_power")
def _g_generic_power(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    pos = [p for p in x if _positive(x[p])]
    c = _log_linear([np.ones_like(y), *[np.log(x[p]) for p in pos]], y)
    return {"a": float(np.exp(c[0])), **{f"b{i}": float(c[i]) for i in range(1, len(pos) + 1)}}


@_guess("generic_exponential")
def _g_generic_exp(x: Mapping[str, np.ndarray], y: np.ndarray, t0: float) -> dict[str, float]:
    s = x["x"] - np.min(x["x"])
    sign = -1.0 if np.median(y) < 0 else 1.0
    c = _log_linear([np.ones_like(s), s], sign * y)
    return {"a": sign * float(np.exp(c[0])), "b": float(c[1])}


def _linear_guess(expr: Expression, params: Sequence[str], env: Mapping[str, np.ndarray],
                  y: np.ndarray) -> dict[str, float] | None:
    """Least squares where the law is linear in its constants (checked numerically):
    the columns are its values at the unit vectors less its value at zero."""
    def at(theta: np.ndarray) -> np.ndarray:
        val = expr.evaluate({**env, **dict(zip(params, map(float, theta)))})
        return np.broadcast_to(np.asarray(val, float), y.shape)

    n = len(params)
    zero = at(np.zeros(n))
    cols = [at(np.eye(n)[i]) - zero for i in range(n)]
    probe = np.random.default_rng(0).normal(size=n)
    if not np.allclose(at(probe), zero + np.column_stack(cols) @ probe, rtol=1e-8, atol=1e-10,
                       equal_nan=False):
        return None
    coef, _ = _lstsq(cols, y - zero)
    return dict(zip(params, map(float, np.where(np.isfinite(coef), coef, 0.0))))


def guess(family: Family, x: Mapping[str, np.ndarray], y: np.ndarray, t0: float = 0.0
          ) -> dict[str, float]:
    """Starting values for ``family``'s constants from data ``x`` (keyed by
    placeholder: ``x``, ``x1``, ...) and response ``y``; ``t0`` the absolute zero of
    the primary input's temperature scale where the family uses ``{T0}``. A family
    linear in its constants gets its least-squares solution; the others a
    linearisation, or a profile over one nonlinear constant with the linear ones
    solved for each value; every constant not set falls back to 1."""
    xs = {k: np.asarray(v, dtype=float) for k, v in x.items()}
    yy = np.asarray(y, dtype=float)
    expr, params = _evaluator(family, xs, t0)
    out: dict[str, float] = {}
    if family.name in _GUESSES:
        with np.errstate(all="ignore"):
            out = _GUESSES[family.name](xs, yy, t0)
    else:
        out = _linear_guess(expr, params, xs, yy) or {}
    return {p: float(out[p]) if p in out and np.isfinite(out[p]) else 1.0 for p in params}


# ---- rivals -------------------------------------------------------------------------------

RESERVED = set(FUNCTIONS) | set(BRANCHES) | set(NAMED_NUMBERS)


def _free_names(params: Sequence[str], taken: Collection[str]) -> dict[str, str]:
    """Each constant's name, suffixed away from ``taken`` and the language's own names
    (``a`` -> ``fa_a`` -> ``fb_a`` ...)."""
    used = set(taken) | RESERVED
    out: dict[str, str] = {}
    for p in params:
        name, k = p, 0
        while name in used:
            name = f"f{chr(ord('a') + k % 26)}{k // 26 or ''}_{p}"
            k += 1
        used.add(name)
        out[p] = name
    return out


def instantiate(family: Family, task_id: str, inputs: Sequence[str],
                data: Mapping[str, np.ndarray], y: np.ndarray, multi_group: bool,
                taken: Collection[str] = ()) -> FamilyRival | None:
    """``family`` for one task: its expression in the task's input names, its
    constants renamed away from ``taken`` (and the inputs), starting values from the
    data; None where it does not apply or does not evaluate finitely at its start."""
    x = {placeholder(i): np.asarray(data[n], dtype=float) for i, n in enumerate(inputs)}
    if not applicable(family, x):
        return None
    t0 = ABSOLUTE_ZERO.get(task_id)
    if "{T0}" in family.expr and t0 is None:
        return None
    template, params = expand(family, x)
    init = guess(family, x, y, t0 or 0.0)
    names = _free_names(params, [*taken, *inputs])
    expr = _fill(_rename(template, names), {p: n for p, n in zip(x, inputs)},
                 float(np.min(x["x"])), t0 or 0.0)
    start = {names[p]: v for p, v in init.items()}
    try:
        value = Expression(expr).evaluate({**{n: np.asarray(data[n], float) for n in inputs},
                                           **start})
    except (ValueError, ArithmeticError) as err:
        log.info("family %s on %s: %s", family.name, task_id, err)
        return None
    if not np.all(np.isfinite(np.asarray(value, dtype=float))):
        log.info("family %s on %s: not finite at its start", family.name, task_id)
        return None
    local = [names[p] for p in family.local if p in names] if multi_group else []
    return FamilyRival(name=family.name, expr=expr,
                       global_names=[names[p] for p in params if names[p] not in local],
                       local_names=local, init=start, citation=family.citation)


def families_of(task_id: str) -> tuple[Family, ...]:
    """The task's kind's families, then the generic ones."""
    return (*KINDS.get(KIND_OF.get(task_id, ""), ()), *GENERIC)


def rivals_for(task_id: str, inputs: Sequence[str], data: Mapping[str, np.ndarray],
               y: np.ndarray, multi_group: bool, taken: Collection[str]) -> list[FamilyRival]:
    """The standard families of the task's kind and the generic ones, concrete for
    the task (see :func:`instantiate`); a family whose expression another already
    gave is offered once."""
    out: list[FamilyRival] = []
    seen: set[str] = set()
    for family in families_of(task_id):
        rival = instantiate(family, task_id, inputs, data, y, multi_group, taken)
        if rival is None:
            continue
        names = [*rival.global_names, *rival.local_names]
        shape = _rename(rival.expr, {n: f"_c{i}" for i, n in enumerate(sorted(names))})
        if shape in seen:
            continue
        seen.add(shape)
        out.append(rival)
    return out
