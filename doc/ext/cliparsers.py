"""The argument parsers the CLI reference renders, walked without Sphinx:
``doc/ext/cli.py`` renders them and ``tests/unit/test_docs.py`` compares
their commands with the pages.
"""

import argparse


def engine_parser() -> argparse.ArgumentParser:
    """``recovery-engine``'s parser: the options it registers, as
    ``recovery.engine.server.load_conf`` registers them, parsed from no
    arguments and no config file."""
    from oslo_config import cfg
    from oslo_log import log

    import recovery.cmd.engine
    from recovery import conf as recovery_conf

    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    log.register_options(conf)
    conf(args=[], project="recovery", prog="recovery-engine",
         default_config_files=[], default_config_dirs=[])
    # oslo.config keeps the argparse parser it made, with every CLI
    # option added to it; it offers no public accessor.
    parser = conf._oparser
    parser.description = recovery.cmd.engine.__doc__
    return parser


def subcommands(parser: argparse.ArgumentParser
                ) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_paths(parser: argparse.ArgumentParser, prefix: str
                  ) -> list[str]:
    """Every command the parser takes, as typed: ``recovery db upgrade``
    (a test compares them with the CLI pages)."""
    paths = []
    for name, sub in subcommands(parser).items():
        path = f"{prefix} {name}"
        paths.append(path)
        paths.extend(command_paths(sub, path))
    return paths


def help_of(parser: argparse.ArgumentParser, name: str) -> str:
    """The one-line help of the parser's subcommand ``name``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""
