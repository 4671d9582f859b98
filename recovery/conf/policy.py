"""``[oslo_policy]``: oslo.policy's own options (policy_file,
policy_dirs, enforce_scope, enforce_new_defaults, ...), registered at
start so that a ``masakari.conf`` setting them is read, not reported as
unused. The sample config lists them under oslo.policy's namespace."""

from oslo_config import cfg
from oslo_policy import opts


def register_opts(conf: cfg.ConfigOpts) -> None:
    opts.set_defaults(conf)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return []
