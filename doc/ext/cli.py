"""The command-line reference, generated from the argument parsers.

``.. cli-reference:: module:function`` renders the parser the function
returns: its usage, description, options and, recursively, every
subcommand as a section of its own, then its epilog (``recovery``'s exit
codes). ``recovery-engine`` parses its arguments with oslo.config, so
``cliparsers.engine_parser`` builds that parser as ``recovery-engine`` does.
The same pages make the man pages, so ``recovery --help``, the HTML
reference and ``man recovery`` never disagree.
"""

import argparse
import importlib
import textwrap

from cliparsers import help_of
from cliparsers import subcommands
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def _literal(text: str) -> list[str]:
    return ["::", ""] + ["   " + line for line in text.splitlines()] + [""]


def render(parser: argparse.ArgumentParser, prog: str, level: int,
           summary: str = "") -> list[str]:
    """reStructuredText for one parser and its subcommands."""
    marks = "=-~^\"'"
    out = []
    if level:
        out += [prog, marks[level] * len(prog), ""]
    parser.prog = prog
    usage = parser.format_usage().strip()
    out += _literal(usage)
    for text in (summary, parser.description):
        if text:
            out += textwrap.dedent(text).strip().splitlines() + [""]
    options = [action for action in parser._actions
               if not isinstance(action, argparse._SubParsersAction)
               and action.help != argparse.SUPPRESS]
    if options:
        out += [".. program:: " + prog, ""]
        for action in options:
            if action.option_strings:
                names = ", ".join(
                    name + ("" if action.nargs == 0 else
                            " " + (action.metavar or action.dest.upper()))
                    for name in action.option_strings)
            else:
                names = action.metavar or action.dest
            out += [".. option:: " + names, ""]
            help_text = action.help or ""
            if action.choices and not isinstance(action.choices, dict):
                help_text += (" One of: "
                              + ", ".join(map(str, action.choices)) + ".")
            for line in textwrap.wrap(help_text.replace("*", "\\*")):
                out.append("   " + line)
            out.append("")
    for name, sub in subcommands(parser).items():
        out += render(sub, f"{prog} {name}", level + 1, help_of(parser, name))
    if parser.epilog:
        out += _literal(parser.epilog)
    return out


class CliReference(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        module, _, function = self.arguments[0].partition(":")
        parser = getattr(importlib.import_module(module), function)()
        lines = render(parser, parser.prog, 0)
        node = nodes.container()
        nested_parse_with_titles(
            self.state, StringList(lines, source=self.arguments[0]), node)
        return node.children


def setup(app):
    app.add_directive("cli-reference", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
