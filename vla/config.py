"""Building objects from Hydra config nodes, with the user's error in front."""

from __future__ import annotations

import hydra
from hydra.errors import InstantiationException


def instantiate(node, **kwargs):
    """`hydra.utils.instantiate`, re-raising a constructor's ValueError as itself.

    Hydra wraps every constructor error in an InstantiationException; for a bad value
    (`d_model=100 is not divisible by n_heads=3`) the original message is the one to show.
    """
    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as e:
        cause = e.__cause__
        while isinstance(cause, InstantiationException) and cause.__cause__ is not None:
            cause = cause.__cause__
        if isinstance(cause, ValueError):
            raise cause from None
        raise
