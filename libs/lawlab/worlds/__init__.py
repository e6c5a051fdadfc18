"""Parallel worlds: the world model and its noise (``world``), the world key
(``worldkey``), the public catalogue of cited mechanisms (``mechanisms``) and the
nearest-records search the noise is resampled from (``neighbours``)."""
