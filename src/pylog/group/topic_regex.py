"""Regular-expression subscriptions of KIP-848 consumer groups (``SubscribedTopicRegex``).

Kafka compiles a member's regex with RE2/J and subscribes it to every non-internal topic
whose whole name matches (``matcher.matches()``). pylog matches with Python's ``re``
(``fullmatch``), which agrees with RE2 on the common syntax (literals, classes, ``.``,
alternation, groups, ``*`` ``+`` ``?`` ``{m,n}`` and their lazy forms, ``^`` ``$`` ``\\A``
``\\b`` ``\\d`` ``\\w`` ``\\s``, ``(?i)``), but not everywhere:

- Python accepts what RE2 refuses: backreferences (``\\1``, ``(?P=name)``), lookaround
  (``(?=`` ``(?!`` ``(?<=`` ``(?<!``), atomic groups and possessive quantifiers (``(?>``,
  ``*+``), conditionals (``(?(1)...)``). A topic would match here and not in Kafka.
- RE2 accepts what Python reads differently or refuses: ``\\pL`` / ``\\p{Greek}`` Unicode
  classes, ``\\Q...\\E`` quoting, ``\\z``, and ``\\Z`` (end of text in Python, not in RE2).

So every construct of these lists is refused, with INVALID_REGULAR_EXPRESSION, as is a
pattern neither engine compiles; what is left matches the same names in both.

Pure functions; thread-safe.
"""

from __future__ import annotations

import functools
import re

__all__ = ["compile_subscription"]

# Constructs where Python's re and RE2/J differ, each with what to say.
_REFUSED = (
    (re.compile(r"\\[1-9]"), "backreferences"),
    (re.compile(r"\(\?P="), "backreferences"),
    (re.compile(r"\\[gk]<"), "backreferences"),
    (re.compile(r"\(\?<?[=!]"), "lookaround"),
    (re.compile(r"\(\?>"), "atomic groups"),
    (re.compile(r"[*+?}]\+"), "possessive quantifiers"),
    (re.compile(r"\(\?\("), "conditionals"),
    (re.compile(r"\\[pP]"), "Unicode classes (\\p)"),
    (re.compile(r"\\[QE]"), "\\Q...\\E quoting"),
    (re.compile(r"\\[zZG]"), "\\z, \\Z and \\G"),
)


@functools.lru_cache(maxsize=256)
def compile_subscription(regex: str) -> re.Pattern[str]:
    """The compiled pattern of a subscription regex; match topic names with ``fullmatch``.

    Raises:
        ValueError: the pattern does not compile, or uses a construct on which Python's
            ``re`` and RE2/J (Kafka's engine) disagree; the message says which.
    """
    # Escaped backslashes first, so "\\\\1" (a literal backslash then "1") is not taken
    # for a backreference.
    probe = regex.replace("\\\\", "")
    for pattern, what in _REFUSED:
        if pattern.search(probe):
            raise ValueError(
                f"{what} are not supported in topic regular expressions "
                f"(Kafka matches with RE2/J): {regex!r}"
            )
    try:
        return re.compile(regex)
    except re.error as exc:
        raise ValueError(f"invalid topic regular expression {regex!r}: {exc}") from None
