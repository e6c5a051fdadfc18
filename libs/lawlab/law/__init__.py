"""The law language and its contract: the safe expression language (``expr``), the
module a solver submits and how it is read (``contract``), the literals a scorer
refits (``literals``) and the one evaluator of a law module (``predict``)."""
