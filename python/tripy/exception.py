"""The one exception type users see: every user error in Tripy is a ``TripyException``."""


class TripyException(Exception):
    """
    Raised for every user error: bad arguments, shape or dtype mismatches, invalid compile inputs,
    out-of-range runtime inputs and backend failures. Its message shows the user's source lines.

    Example::

        import tripy as tp

        try:
            tp.InputInfo(shape=((4, 2, 1),), dtype=tp.float32)
        except tp.TripyException as err:
            assert "min <= opt <= max" in str(err)
    """
