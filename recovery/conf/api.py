"""``[api]`` options: the notification API of ``recovery-engine``."""

from oslo_config import cfg

GROUP = "api"

OPTS = [
    cfg.BoolOpt(
        "enabled",
        default=True,
        help="Serve the notification API from recovery-engine (with "
             "/healthcheck, and /metrics unless [metrics] host is set). "
             "False for engines behind a separate API "
             "(recovery.wsgi.api:application under a WSGI server, as "
             "masakari-api runs): they claim the notifications it stores "
             "in the shared database, and serve /metrics only on "
             "[metrics] host. The WSGI entry point does not read it.",
    ),
    cfg.HostAddressOpt(
        "host",
        default="127.0.0.1",
        deprecated_opts=[cfg.DeprecatedOpt("masakari_api_listen",
                                           group="DEFAULT")],
        help="Address the notification API listens on. Loopback by "
             "default: listening elsewhere is a choice to make with "
             "auth_strategy keystone or token.",
    ),
    cfg.PortOpt(
        "port",
        default=15868,
        deprecated_opts=[cfg.DeprecatedOpt("masakari_api_listen_port",
                                           group="DEFAULT")],
        help="Port of the notification API (15868 is Masakari's, so "
             "monitors need only a new address).",
    ),
    cfg.StrOpt(
        "auth_strategy",
        default="keystone",
        choices=[
            ("keystone", "Keystone tokens, validated by keystonemiddleware "
                         "(configured in [keystone_authtoken]); what the "
                         "caller may do is the policy's ([oslo_policy]: "
                         "admins only by default)."),
            ("token", "One static token, read from token_file, sent as "
                      "X-Auth-Token; its holder is an admin to the "
                      "policy."),
            ("noauth", "No authentication. Refused unless host is a "
                       "loopback address."),
        ],
        help="How callers of the notification API are authenticated.",
    ),
    cfg.StrOpt(
        "token_file",
        help="File whose content (surrounding whitespace stripped) is the "
             "token callers must send when auth_strategy is token. Keep it "
             "readable by the engine's user only.",
    ),
    cfg.IntOpt(
        "max_request_body_size",
        default=114688,
        # Masakari's API limits its bodies with oslo.middleware's
        # sizelimit, whose option this was.
        deprecated_opts=[cfg.DeprecatedOpt("max_request_body_size",
                                           group="oslo_middleware")],
        min=1024,
        help="Largest request body accepted, in bytes; larger ones get "
             "413.",
    ),
    cfg.IntOpt(
        "duplicate_notification_detection_interval",
        default=180,
        deprecated_opts=[cfg.DeprecatedOpt(
            "duplicate_notification_detection_interval", group="DEFAULT")],
        min=0,
        help="Seconds during which a notification with the same type, "
             "host and payload as an earlier one is refused with 409. "
             "0 turns the check off.",
    ),
    cfg.FloatOpt(
        "nova_check_timeout",
        default=5.0,
        min=0.1,
        help="Seconds the API waits for Nova when it checks that a "
             "notification's host exists. When Nova does not answer in "
             "time, the notification is stored anyway and checked when it "
             "is processed: a monitor treats 400 as final, so a "
             "notification is never refused because Nova was slow.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
