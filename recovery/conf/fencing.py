"""``[fencing]`` options: how a failed host is powered off.

Before any instance of a failed host is evacuated, recovery powers the
host off through its BMC and reads the power state back until it is Off.
The options here are the defaults for every host; ``credentials_file``
overrides them host by host (see its help).
"""

from oslo_config import cfg

GROUP = "fencing"

OPTS = [
    cfg.StrOpt(
        "driver",
        default="none",
        choices=[
            ("none", "Do not fence: the host's power is not touched. Only "
                     "safe when something else guarantees the host is "
                     "off."),
            ("redfish", "Power off with a Redfish ComputerSystem.Reset "
                        "(ForceOff) and read PowerState back."),
            ("ipmi", "Power off with IPMI 2.0 (RMCP+) chassis control and "
                     "read the chassis power state back."),
        ],
        help="Fencing driver for the hosts that credentials_file does not "
             "name (all hosts when there is no credentials_file). Fence "
             "agents and levels are set in credentials_file.",
    ),
    cfg.StrOpt(
        "credentials_file",
        default=None,
        sample_default="/etc/recovery/fencing.ini",
        help="Path of an INI file of per-host fencing settings, read and "
             "checked once at start. Each section is a host name as Nova "
             "knows it, or an fnmatch pattern such as 'compute-*'; an "
             "exact name wins over patterns, and among patterns the first "
             "matching section in file order wins. A section fences its "
             "host with one 'driver' (none, redfish, ipmi, fence_agent), "
             "or with levels tried in order until every device of one "
             "proves the host off: 'level1 = kdump', 'level2 = ipmi, "
             "scsi', each name a [device:NAME] section of its own driver "
             "and keys. Keys: driver, address, username, password, system "
             "(Redfish path or id; default: the BMC's only system), port "
             "(IPMI, default 623), verify (Redfish), timeout (this "
             "device's, default [fencing] timeout), no_answer_timeout "
             "(this device's, default [fencing] no_answer_timeout), "
             "agent (fence_agent: "
             "fence_ipmilan, fence_redfish, fence_kdump, ... or a path). "
             "A fence_agent device may also set the agent's own "
             "parameters (lanplus, ssl_insecure, nodename, ...), checked "
             "against its metadata; address, port, username, password, "
             "system and verify become its ip, ipport, username, "
             "password, systems_uri and ssl_insecure. A key a section "
             "does not set comes from the file's [DEFAULT] section, else "
             "from this [fencing] group; a device takes the connection "
             "keys it does not set from its host's. No '%' "
             "interpolation: a password is taken as written. Keep the "
             "file readable by the recovery user only (chmod 600).",
    ),
    cfg.StrOpt(
        "address",
        default=None,
        sample_default="https://{host}-bmc.example.com",
        help="BMC address of every host, '{host}' being replaced by the "
             "host's name. Redfish: a URL, scheme://name[:port] (https:// "
             "is assumed when no scheme is given). IPMI: a host name or "
             "IP address; the UDP port is set by 'port' in "
             "credentials_file (default 623).",
    ),
    cfg.StrOpt(
        "username",
        default=None,
        help="BMC user name of every host, unless credentials_file sets "
             "one for the host. The account needs the right to power the "
             "system off (Redfish: ConfigureComponents; IPMI: operator).",
    ),
    cfg.StrOpt(
        "password",
        default=None,
        secret=True,
        help="BMC password of every host, unless credentials_file sets "
             "one for the host. Never logged.",
    ),
    cfg.StrOpt(
        "verify",
        default="true",
        help="Redfish TLS certificate check: 'true' (check against the "
             "system's CA store), 'false' (do not check; only on a trusted "
             "management network), or the path of a CA bundle file or "
             "directory that signed the BMCs' certificates.",
    ),
    cfg.FloatOpt(
        "timeout",
        default=30.0,
        min=1.0,
        help="Seconds allowed for one fencing device, from its first "
             "power-off request until the power is read back Off (or, "
             "for fence_kdump, until the host's kdump message), every "
             "call included; a device's 'timeout' in credentials_file "
             "overrides it. When the last level's time runs out the "
             "fencing fails and nothing of the host is evacuated.",
    ),
    cfg.FloatOpt(
        "no_answer_timeout",
        default=5.0,
        min=1.0,
        help="Seconds within which a fencing device must answer anything "
             "(a power state, an accepted request, an error, a refusal) "
             "when its level has a later level to try; a device that has "
             "answered nothing by then is out of reach, as a BMC that "
             "lost its power with its host, and its level fails then, "
             "so the next level (a storage fence, say) is tried without "
             "waiting the whole timeout. Every call within it is bounded "
             "by what is left of it. A device that answered anything "
             "keeps its whole timeout, however slow its power-off; a "
             "device of the last level tried (a host with one level) "
             "always waits its whole timeout. BMCs answer a status "
             "request within a few seconds even when their power-off "
             "lags. A device's 'no_answer_timeout' in credentials_file "
             "overrides it; set to timeout or more, it has no effect.",
    ),
    cfg.FloatOpt(
        "poll_interval",
        default=1.0,
        min=0.1,
        help="Seconds between two readings of the power state while "
             "waiting for it to be Off.",
    ),
    cfg.IntOpt(
        "attempts",
        default=3,
        min=1,
        help="Power-off requests per fencing at most. Each request gets an "
             "equal share of the time left to show the power Off; when "
             "the power is still On (or the request failed) at the end of "
             "its share, the request is sent again. A power-off is safe "
             "to repeat. A BMC that refuses the credentials is not asked "
             "again.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
