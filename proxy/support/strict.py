"""The one base of every config model: config.yaml sections, destinations, rules files.

Unknown keys are errors (a typo fails the load with file, line and key instead of being
ignored), models are frozen (config is read, never patched in place), and fields with an
alias (``any``, ``in``, ``continue`` in rules files) can also be given by name.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
