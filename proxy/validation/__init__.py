"""Validation of OpenLineage events against the spec: core models, facet models, pointers.

``EventValidator(strict=..., extra_schema_dir=...).validate(event)`` returns a list of
``ValidationIssue(pointer, message)``; an empty list means the event is valid.
"""

from proxy.validation.issues import ValidationIssue
from proxy.validation.validator import EventValidator

__all__ = ["EventValidator", "ValidationIssue"]
