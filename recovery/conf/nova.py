"""``[nova]`` options: how to reach the Compute API.

The session (TLS, timeout), auth (any keystoneauth1 plugin: ``password``
with a Keystone catalog, ``v3applicationcredential``, or ``admin_token`` /
``none`` with ``endpoint_override`` for standalone use) and adapter
(service type, region, interface, endpoint override) options are
keystoneauth1's own, so they mean what they mean everywhere in OpenStack.
"""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

GROUP = "nova"

DEFAULT_TIMEOUT = 30.0

# Adapter options this project honours; the others keystoneauth1 offers
# (retries, microversion bounds) are decided by the Nova facade on purpose.
_ADAPTER_OPTS = (
    "service-type", "service-name", "valid-interfaces", "region-name",
    "endpoint-override",
)

# Masakari's names ([DEFAULT]) of the session and adapter options, for its
# masakari.conf (recovery/conf/masakari.py).
_MASAKARI_NAMES = {
    "cafile": "nova_ca_certificates_file",
    "insecure": "nova_api_insecure",
    "region_name": "os_region_name",
}

# Auth plugins whose options are listed in the sample config. Any other
# keystoneauth1 plugin still works: its options register when it loads.
_SAMPLE_AUTH_PLUGINS = ("password", "v3applicationcredential", "admin_token")

OPTS = [
    cfg.IntOpt(
        "api_retries",
        default=3,
        min=0,
        help="How many times a Nova request that is safe to repeat (reads, "
             "lock, unlock, service updates, reset-state) is retried after "
             "a connection error, a timeout or a 5xx. An evacuate is retried "
             "only after recovery has checked that Nova did not act on the "
             "first one.",
    ),
    cfg.FloatOpt(
        "late_request_margin",
        default=30.0,
        min=0,
        help="Seconds a request may still reach Nova after its timeout: "
             "one held in a load balancer's queue or an API worker's "
             "backlog, delivered after recovery gave up on it. An evacuate "
             "or a lock whose outcome is unknown (a timeout, a reset after "
             "it was sent, a 5xx) is presumed still in flight until "
             "[nova] timeout plus this margin after it was sent: no second "
             "evacuate goes before that unless Nova shows the first one "
             "failed, and a lock is looked for again after that, and lifted "
             "if it is recovery's. Set it to at least the longest time your "
             "load balancer queues a request (haproxy's 'timeout queue').",
    ),
    cfg.FloatOpt(
        "max_requests_per_second",
        default=50.0,
        min=0,
        help="Cap on the Nova API requests recovery sends per second, all "
             "host recoveries of the process together (retries and each "
             "page of a listing count). Requests over the cap wait their "
             "turn; none fails because of it. Protects the Nova API when "
             "many hosts fail at once. 0 means no cap. The API's host check "
             "at intake (one request per notification) is not queued "
             "behind recoveries.",
    ),
    cfg.StrOpt(
        "placement_endpoint_override",
        help="Placement's URL, for a Nova without a Keystone catalog "
             "(auth_type admin_token or none). With a catalog, Placement "
             "is found there, in the same region and interface as Nova. "
             "Placement is asked how much room the other hosts have "
             "before instances are evacuated: a prediction for the dry "
             "run and the operator, never a gate.",
    ),
    cfg.StrOpt(
        "image_endpoint_override",
        help="The image service's (Glance's) URL, for a Nova without a "
             "Keystone catalog. With a catalog, Glance is found there, in "
             "the same region and interface as Nova. Recovery reads the "
             "properties of its instances' images (hw_tpm_version: a "
             "vTPM, which Nova does not evacuate) once per image, and "
             "caches them. Without Glance, or while it does not answer, "
             "such an instance is tried, and Nova's refusal is its "
             "failure.",
    ),
]


def _with_masakari_names(opts: list[cfg.Opt]) -> list[cfg.Opt]:
    for opt in opts:
        if opt.dest in _MASAKARI_NAMES:
            opt.deprecated_opts.append(cfg.DeprecatedOpt(
                _MASAKARI_NAMES[opt.dest], group="DEFAULT"))
    return opts


def _session_opts() -> list[cfg.Opt]:
    opts = ks_loading.get_session_conf_options()
    for opt in opts:
        if opt.dest == "timeout":
            # Every Nova call has a timeout; keystoneauth's default is none.
            opt.default = DEFAULT_TIMEOUT
    return _with_masakari_names(opts)


def _adapter_opts() -> list[cfg.Opt]:
    opts = [o for o in ks_loading.get_adapter_conf_options(
        include_deprecated=False) if o.name in _ADAPTER_OPTS]
    for opt in opts:
        if opt.dest == "service_type":
            opt.default = "compute"
        elif opt.dest == "valid_interfaces":
            opt.default = ["internal", "public"]
    return _with_masakari_names(opts)


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS + _session_opts() + _adapter_opts(), group=GROUP)
    ks_loading.register_auth_conf_options(conf, GROUP)


def _auth_opts() -> list[cfg.Opt]:
    opts = {o.dest: o for o in ks_loading.get_auth_common_conf_options()}
    for plugin in _SAMPLE_AUTH_PLUGINS:
        for opt in ks_loading.get_auth_plugin_conf_options(plugin):
            opts.setdefault(opt.dest, opt)
    return list(opts.values())


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS + _session_opts() + _adapter_opts() + _auth_opts())]
