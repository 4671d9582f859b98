"""A password that never shows: in a message, a log line or a repr."""


class Secret:
    """A password that shows as ``***`` in str, repr and logs."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        """``text`` with every occurrence of the secret masked: the last
        guard before a library's message reaches a log or an operator."""
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "'***'"

    def __str__(self) -> str:
        return "***"
