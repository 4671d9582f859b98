"""Masakari's ``masakari.conf``, read as it is.

Operators who replace Masakari start ``recovery-engine --config-file
/etc/masakari/masakari.conf`` unchanged. A Masakari option recovery
honours is one of three kinds:

- the same name in the same group: ``host_failure_recovery_threads``,
  ``[host_failure]``, ``[instance_failure] process_all_instances``,
  ``[database]``, ``[keystone_authtoken]``, ``[healthcheck]``, oslo.log's;
- a deprecated name of recovery's own option, in the module that registers
  it (``masakari_api_listen`` is ``[api] host``): oslo.config reads it when
  recovery's name is not set, logs one warning per name used, and the
  sample config lists it;
- Masakari's Nova user (``os_privileged_user_*``) and catalog entry
  (``nova_catalog_admin_info``), registered here under Masakari's names:
  they become ``[nova]``'s password auth. They cannot be deprecated names:
  keystoneauth1 registers an auth plugin's options itself when it loads
  the plugin ``[nova] auth_type`` names, and oslo.config refuses a second
  registration of an option with other deprecated names.

Every other Masakari option is in ``UNUSED``, with what recovery does
instead; each one set in the config files is logged once (``adopt``). The
README's table is made from the same data
(``tools/masakari_conf_table.py``).
"""

import dataclasses
import fnmatch
import logging
import weakref

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from recovery import exception

LOG = logging.getLogger(__name__)

NOVA = "nova"

# Masakari loads the plugin [keystone_authtoken] auth_type names with a
# user name and password; of keystoneauth1's plugins, only the password
# ones take those, and the generic one finds the Identity API's version.
PLUGIN = "password"

#: Masakari's option -> the option of the password plugin it sets in
#: ``[nova]`` (masakari/compute/nova.py builds its Nova session so).
CREDENTIALS = {
    "os_privileged_user_auth_url": "auth_url",
    "os_privileged_user_name": "username",
    "os_privileged_user_password": "password",
    "os_privileged_user_tenant": "project_name",
    "os_user_domain_name": "user_domain_name",
    "os_project_domain_name": "project_domain_name",
    "os_system_scope": "system_scope",
}

# Masakari's endpoint types -> keystoneauth1's interfaces.
_INTERFACES = {"publicURL": "public", "internalURL": "internal",
               "adminURL": "admin"}


def _instead(name: str) -> str:
    return (f"Masakari's name, read when [nova] has no auth_type: set "
            f"[nova] auth_type = password and [nova] {name} instead")


OPTS = [
    cfg.URIOpt(
        "os_privileged_user_auth_url",
        deprecated_for_removal=True,
        deprecated_reason=_instead("auth_url"),
        help="Masakari's Keystone URL of the user recovery calls Nova as. "
             "When os_privileged_user_name is set and [nova] has no "
             "auth_type, the os_privileged_user_* options are [nova]'s "
             "password auth, as Masakari uses them.",
    ),
    cfg.StrOpt(
        "os_privileged_user_name",
        deprecated_for_removal=True,
        deprecated_reason=_instead("username"),
        help="Masakari's name of the user recovery calls Nova as; see "
             "os_privileged_user_auth_url.",
    ),
    cfg.StrOpt(
        "os_privileged_user_password",
        secret=True,
        deprecated_for_removal=True,
        deprecated_reason=_instead("password"),
        help="Masakari's password of os_privileged_user_name.",
    ),
    cfg.StrOpt(
        "os_privileged_user_tenant",
        deprecated_for_removal=True,
        deprecated_reason=_instead("project_name"),
        help="Masakari's project (name) of os_privileged_user_name.",
    ),
    cfg.StrOpt(
        "os_user_domain_name",
        default="default",
        deprecated_for_removal=True,
        deprecated_reason=_instead("user_domain_name"),
        help="Masakari's domain name of os_privileged_user_name.",
    ),
    cfg.StrOpt(
        "os_project_domain_name",
        default="default",
        deprecated_for_removal=True,
        deprecated_reason=_instead("project_domain_name"),
        help="Masakari's domain name of os_privileged_user_tenant.",
    ),
    cfg.StrOpt(
        "os_system_scope",
        deprecated_for_removal=True,
        deprecated_reason=_instead("system_scope"),
        help="Masakari's system scope of os_privileged_user_name's token.",
    ),
    cfg.StrOpt(
        "nova_catalog_admin_info",
        deprecated_for_removal=True,
        deprecated_reason="Masakari's name: set [nova] service_type, "
                          "service_name and valid_interfaces instead",
        help="Masakari's <service_type>:<service_name>:<endpoint_type> of "
             "Nova in the Keystone catalog (e.g. compute:nova:publicURL). "
             "When set, they are the defaults of [nova] service_type, "
             "service_name and valid_interfaces. Unset (recovery's "
             "default, not Masakari's), [nova]'s own defaults apply: any "
             "compute service, internal endpoint first.",
    ),
]


@dataclasses.dataclass(frozen=True)
class Unused:
    """Masakari options recovery does not read, and why."""

    group: str                  # a section, or a pattern (fnmatch)
    names: tuple[str, ...]      # options, or patterns
    reason: str
    # WARNING where the operator chose something recovery will not do;
    # INFO where recovery needs no such setting.
    level: int = logging.INFO

    def matches(self, group: str, name: str) -> bool:
        name = name.replace("-", "_")
        return (fnmatch.fnmatchcase(group, self.group)
                and any(fnmatch.fnmatchcase(name, pattern)
                        for pattern in self.names))


_RPC = ("recovery has no RPC: its API stores each notification and the "
        "engines claim it from the database (the message bus carries only "
        "its notifications: [oslo_messaging_notifications])")
_TLS = ("recovery's API speaks plain HTTP: terminate TLS in front of it, as "
        "Kolla-Ansible's haproxy does")
_WSGI = ("recovery's API has no paste pipeline; its server is set in "
         "[api]")
_DB = ("recovery's store opens its own connections ([database] "
       "connection and the pool options recovery lists) and does not use "
       "this oslo.db option")
_INTERNAL = "a Masakari process setting; recovery has no equivalent"

#: Every Masakari 22 option recovery does not read (under any name).
UNUSED = (
    Unused("DEFAULT", ("rpc_response_timeout", "executor_thread_pool_size",
                       "rpc_ping_enabled", "masakari_topic"), _RPC),
    Unused("oslo_messaging_notifications", ("topics",),
           "recovery publishes Masakari's versioned notifications on "
           "versioned_notifications, as Masakari does, whatever this says"),
    Unused("oslo_messaging_kafka", ("*",),
           "recovery installs oslo.messaging's RabbitMQ driver only: set "
           "a rabbit:// transport_url", logging.WARNING),
    Unused("oslo_messaging_notifications", ("retry",),
           "recovery sends each notification once and retries it from its "
           "own bounded queue every second while the bus is away "
           "(doc: Notifications)"),
    Unused("taskflow", ("*",),
           "the taskflow driver's database: recovery journals each step of "
           "a recovery in its own store ([database] connection)"),
    Unused("coordination", ("*",),
           "recovery's engines claim each notification in the store "
           "([database] connection), which keeps two engines off one host "
           "without a lock service"),
    Unused("DEFAULT", ("notification_driver",),
           "recovery has one engine, not drivers"),
    Unused("taskflow_driver_recovery_flows", ("*",),
           "recovery's flows are its own (README, Host failure); taskflow "
           "tasks cannot be plugged in", logging.WARNING),
    Unused("DEFAULT", ("wait_period_after_service_update",),
           "recovery forces the failed host's nova-compute down and goes "
           "on as soon as Nova shows it down, instead of waiting a fixed "
           "time"),
    Unused("DEFAULT", ("wait_period_after_power_off",
                       "wait_period_after_power_on"),
           "recovery's waits for an instance to stop or start are "
           "[host_failure] state_change_timeout (host failures) and "
           "[instance_failure] recovery_timeout (instance failures): set "
           "those", logging.WARNING),
    Unused("DEFAULT", ("process_unfinished_notifications_interval",
                       "retry_notification_new_status_interval"),
           "an engine claims a new notification at once, and retries one "
           "in error after [engine] retry_backoff (doubled up to "
           "retry_backoff_max, [engine] retry_max_attempts times)"),
    Unused("DEFAULT", ("check_expired_notifications_interval",
                       "notifications_expired_interval"),
           "a running notification is leased ([engine] lease_seconds): one "
           "whose engine died is resumed by another, none expires"),
    Unused("instance_failure", ("ha_enabled_instance_metadata_key",),
           "recovery reads [host_failure] ha_enabled_instance_metadata_key "
           "for instance failures too", logging.WARNING),
    Unused("DEFAULT", ("auth_strategy",),
           "[api] auth_strategy decides (keystone by default, as "
           "Masakari's); Masakari's noauth2 has no equivalent",
           logging.WARNING),
    Unused("DEFAULT", ("use_ssl",), _TLS, logging.WARNING),
    Unused("ssl", ("*",), _TLS, logging.WARNING),
    Unused("wsgi", ("ssl_*",), _TLS, logging.WARNING),
    Unused("wsgi", ("*",), _WSGI),
    Unused("DEFAULT", ("api_paste_config", "wsgi_log_format", "tcp_keepidle",
                       "wsgi_default_pool_size", "max_header_line",
                       "wsgi_keep_alive", "client_socket_timeout",
                       "wsgi_server_debug"), _WSGI),
    Unused("DEFAULT", ("masakari_api_workers",),
           "recovery-engine serves its API itself; run "
           "recovery.wsgi.api:application under a WSGI server for more "
           "workers"),
    Unused("DEFAULT", ("use_forwarded_for",),
           "recovery's API does not read X-Forwarded-For"),
    Unused("oslo_middleware", ("enable_proxy_headers_parsing",),
           "recovery's API does not read proxy headers: only its version "
           "document's self link is made from the request's URL"),
    Unused("oslo_middleware", ("http_basic_auth_user_file",),
           "recovery's API has no HTTP basic auth"),
    Unused("cors", ("*",), "recovery's API sends no CORS headers"),
    Unused("oslo_middleware_tracing", ("*",),
           "recovery sends no traces"),
    Unused("DEFAULT", ("osapi_max_limit",),
           "recovery's API returns as many items as a listing's limit "
           "asks, with no cap"),
    Unused("DEFAULT", ("osapi_masakari_link_prefix",),
           "recovery's listings carry no links"),
    Unused("DEFAULT", ("notification_delay_max",),
           "recovery refuses a duplicate notification in the transaction "
           "that stores it: no random delay is needed"),
    Unused("osapi_v1", ("project_id_regex",),
           "recovery takes a project id in the URL in Masakari's default "
           "form, lower-case hex digits and dashes, whatever this says",
           logging.WARNING),
    Unused("osapi_v1", ("*",),
           "Masakari's deprecated API extension switches"),
    Unused("DEFAULT", ("service_down_time",),
           "Masakari's own services' liveness; recovery's [safety] "
           "service_down_time is Nova's and is not the same setting"),
    Unused("DEFAULT", ("graceful_shutdown_timeout",),
           "recovery's is [engine] graceful_shutdown_timeout, where 0 does "
           "not wait (oslo.service's 0 waits without end)",
           logging.WARNING),
    Unused("DEFAULT", ("host",),
           "recovery names each engine <hostname>:<pid> in its leases"),
    Unused("DEFAULT", ("cafile", "certfile", "keyfile", "insecure",
                       "timeout", "collect_timing", "split_loggers"),
           "Masakari registers keystoneauth1's session options here, but "
           "its Nova client does not read them; recovery's are in [nova]"),
    Unused("DEFAULT", ("tempdir", "monkey_patch", "monkey_patch_modules",
                       "pybasedir", "bindir", "state_path",
                       "fatal_exception_format_errors", "engine_manager",
                       "report_interval", "periodic_enable",
                       "periodic_interval_max", "periodic_fuzzy_delay",
                       "backdoor_port", "backdoor_socket",
                       "log_options"), _INTERNAL),
    Unused("oslo_versionedobjects", ("*",), _INTERNAL),
    Unused("oslo_concurrency", ("*",),
           "recovery takes no file locks (Kolla-Ansible writes lock_path)"),
    Unused("DEFAULT", ("enabled_apis",),
           "Kolla-Ansible writes it; Masakari 22 does not read it either"),
    Unused("database", ("sqlite_synchronous", "backend", "slave_connection",
                        "asyncio_connection", "asyncio_slave_connection",
                        "synchronous_reader", "connection_debug",
                        "connection_trace", "use_db_reconnect",
                        "db_retry_interval", "db_inc_retry_interval",
                        "db_max_retry_interval", "db_max_retries",
                        "connection_parameters"), _DB),
)


def unused(group: str, name: str) -> Unused | None:
    """The entry of ``UNUSED`` that option ``[group] name`` falls under."""
    return next((entry for entry in UNUSED if entry.matches(group, name)),
                None)


# The configs already adopted, by id (the entry goes with its config):
# one process loads Nova more than once from one config.
_ADOPTED: "weakref.WeakValueDictionary[int, cfg.ConfigOpts]" = (
    weakref.WeakValueDictionary())


def adopt(conf: cfg.ConfigOpts) -> None:
    """Read ``conf``'s Masakari options: Masakari's Nova user and catalog
    entry become ``[nova]``'s defaults (what ``[nova]`` sets wins), and
    each option of ``UNUSED`` set in the config files is logged, once per
    config. Called before Nova's auth is loaded, which every process that
    reads a config does (the engine, the CLI, the WSGI API).

    Raises ConfigError for a ``nova_catalog_admin_info`` that is not
    Masakari's form."""
    if _ADOPTED.get(id(conf)) is conf:
        return
    _credentials(conf)
    _catalog(conf)
    for group, name in _set_in_files(conf):
        entry = unused(group, name)
        if entry is not None:
            LOG.log(entry.level, "Masakari option [%s] %s is not used: %s",
                    group, name, entry.reason)
    _ADOPTED[id(conf)] = conf


def _credentials(conf: cfg.ConfigOpts) -> None:
    nova = conf[NOVA]
    if not conf.os_privileged_user_name:
        return
    if nova.auth_type or nova.auth_section:
        LOG.info("Masakari options [DEFAULT] os_privileged_user_* are not "
                 "used: [nova] names its own auth")
        return
    # The options keystoneauth1 registers when it loads the plugin, so
    # that their defaults can be set now; its own registration is then a
    # no-op.
    conf.register_opts(ks_loading.get_auth_plugin_conf_options(PLUGIN),
                       group=NOVA)
    conf.set_default("auth_type", PLUGIN, group=NOVA)
    for masakari_name, name in CREDENTIALS.items():
        conf.set_default(name, conf[masakari_name], group=NOVA)


def _catalog(conf: cfg.ConfigOpts) -> None:
    info = conf.nova_catalog_admin_info
    if info is None:
        return
    parts = info.split(":")
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise exception.ConfigError(
            f"[DEFAULT] nova_catalog_admin_info is {info!r}, not Masakari's "
            f"<service_type>:<service_name>:<endpoint_type> (e.g. "
            f"compute:nova:publicURL); or set [nova] service_type, "
            f"service_name and valid_interfaces")
    service_type, service_name, endpoint_type = parts
    conf.set_default("service_type", service_type, group=NOVA)
    conf.set_default("service_name", service_name or None, group=NOVA)
    conf.set_default("valid_interfaces",
                     [_INTERFACES.get(endpoint_type, endpoint_type)],
                     group=NOVA)


def _set_in_files(conf: cfg.ConfigOpts) -> list[tuple[str, str]]:
    """Each ``(group, option)`` the config files set, sorted: the names
    as oslo.config parsed them (its namespace holds one dict of sections
    per file), whether or not an option of that name is registered. That
    is oslo.config's private state: should a release change it, none are
    found, and the start says so, rather than fail."""
    try:
        parsed = conf._namespace._parsed
    except AttributeError:
        LOG.warning("Cannot tell which Masakari options the config files "
                    "set (this oslo.config keeps them elsewhere): the "
                    "options recovery does not use are not listed")
        return []
    found = {(group, name)
             for sections in parsed
             for group, options in sections.items()
             for name in options}
    return sorted(found)


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("DEFAULT", OPTS)]
