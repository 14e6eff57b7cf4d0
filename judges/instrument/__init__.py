"""The instrument check of a simulated wave: does the scorer read what the simulator did?"""

from judges.instrument.agreement import Expectation, agreement, expectation

__all__ = ["Expectation", "agreement", "expectation"]
