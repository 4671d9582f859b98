"""``[fencing]`` options: how a failed host is powered off."""

from oslo_config import cfg

GROUP = "fencing"

OPTS: list[cfg.Opt] = []


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
