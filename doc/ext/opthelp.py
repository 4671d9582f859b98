"""Option help as reStructuredText reads it.

oslo.config's extension puts each option's help into the page as
reStructuredText, while the help is written for ``--help`` and the sample
file, where ``compute-*`` is a pattern: a lone ``*`` there starts an
emphasis that never ends, which a build with warnings as errors refuses.
Such a star (after a word, not before one) is escaped here, and an
underscore before it (``os_privileged_user_*``, else a link); nothing
else in the help changes.
"""

import re

from oslo_config import sphinxext

LONE_STAR = re.compile(r"(?<=[^\s*\\])(_?)\*(?![\w*])")
_format_opt = sphinxext._format_opt


def _escaped(opt, group_name):
    for line in _format_opt(opt, group_name):
        yield LONE_STAR.sub(lambda m: m[1] and "\\_\\*" or "\\*", line)


def setup(app):
    sphinxext._format_opt = _escaped
    return {"parallel_read_safe": True, "parallel_write_safe": True}
