"""Human labels, in one place: which dialogues people label (`sampling`), the sheets they fill
(`sheets`), reading filled sheets back (`reading`, untrusted input checked before anything is used or
written), a synthetic annotator for runs without people (`synthetic`), and agreement between people
and judges (`agreement`: kappa, alpha, and the agreement table Table 5 and the judge report card read).

Stages draw on it: analysis (Table 5), validity (human-anchored estimates), trust (the report card's
human agreement) and explore (the annotation widget).
"""

from personalens_utils.base.errors import KitError


class AnnotationError(KitError, ValueError):
    """A sheet, sample or manifest cannot be used: the message names the file, row and column."""
