"""Print the README's table: every option of Masakari 22's
``masakari.conf`` (its conf modules and the libraries its sample config
lists, oslo-config-generator's namespaces) and what recovery does with it.

The verdicts come from recovery's registered options (their deprecated
names) and from recovery/conf/masakari.py, the data that also makes the
log lines at start, so the table cannot say otherwise than the engine::

    .tox/py3/bin/python tools/masakari_conf_table.py
"""

import importlib.metadata
import sys

from oslo_config import cfg

from recovery.conf import masakari

# recovery's namespaces (etc/oslo-config-generator/recovery.conf).
NAMESPACES = ("recovery", "oslo.log", "keystonemiddleware.auth_token",
              "oslo.middleware.healthcheck", "oslo.policy", "recovery.bus")

#: Masakari 22.0.0's options, by group: masakari.conf's modules (its
#: list_opts, the keystoneauth1 session options masakari/conf/nova.py
#: registers in [DEFAULT] too, and the recovery flows' options), and the
#: namespaces of etc/masakari/masakari-config-generator.conf.
MASAKARI_22: dict[str, str] = {
    "oslo_policy": (
        "enforce_new_defaults policy_file policy_default_rule policy_dirs "
        "remote_content_type remote_ssl_verify_server_crt "
        "remote_ssl_ca_crt_file remote_ssl_client_crt_file "
        "remote_ssl_client_key_file remote_timeout"
    ),
    "keystone_authtoken": (
        "www_authenticate_uri auth_version interface delay_auth_decision "
        "http_connect_timeout http_request_max_retries cache certfile "
        "keyfile cafile insecure region_name memcached_servers "
        "token_cache_time memcache_security_strategy memcache_secret_key "
        "memcache_tls_enabled memcache_tls_cafile memcache_tls_certfile "
        "memcache_tls_keyfile memcache_tls_allowed_ciphers "
        "memcache_pool_dead_retry memcache_pool_maxsize "
        "memcache_pool_socket_timeout memcache_pool_unused_timeout "
        "memcache_pool_conn_get_timeout memcache_use_advanced_pool "
        "include_service_catalog enforce_token_bind service_token_roles "
        "service_token_roles_required service_type memcache_sasl_enabled "
        "memcache_username memcache_password auth_type auth_section"
    ),
    "DEFAULT": (
        "executor_thread_pool_size rpc_response_timeout transport_url "
        "control_exchange rpc_ping_enabled debug log-config-append "
        "log-date-format log-file log-dir use-syslog use-journal "
        "syslog-log-facility use-json use_stderr log_color "
        "log_rotate_interval log_rotate_interval_type max_logfile_count "
        "max_logfile_size_mb log_rotation_type "
        "logging_context_format_string logging_default_format_string "
        "logging_debug_format_suffix logging_exception_prefix "
        "logging_user_identity_format default_log_levels publish_errors "
        "instance_format instance_uuid_format rate_limit_interval "
        "rate_limit_burst rate_limit_except_level fatal_deprecations "
        "auth_strategy use_forwarded_for osapi_max_limit "
        "osapi_masakari_link_prefix notification_delay_max tempdir "
        "monkey_patch monkey_patch_modules masakari_topic "
        "duplicate_notification_detection_interval "
        "wait_period_after_service_update wait_period_after_evacuation "
        "verify_interval wait_period_after_power_off "
        "wait_period_after_power_on "
        "process_unfinished_notifications_interval "
        "retry_notification_new_status_interval "
        "check_expired_notifications_interval "
        "notifications_expired_interval host_failure_recovery_threads "
        "notification_driver fatal_exception_format_errors "
        "nova_catalog_admin_info os_region_name nova_ca_certificates_file "
        "nova_api_insecure os_privileged_user_name "
        "os_privileged_user_password os_privileged_user_tenant "
        "os_privileged_user_auth_url os_user_domain_name "
        "os_project_domain_name os_system_scope pybasedir bindir state_path "
        "host engine_manager report_interval periodic_enable "
        "periodic_interval_max periodic_fuzzy_delay use_ssl "
        "masakari_api_listen masakari_api_listen_port masakari_api_workers "
        "service_down_time backdoor_port backdoor_socket log_options "
        "graceful_shutdown_timeout api_paste_config wsgi_log_format "
        "tcp_keepidle wsgi_default_pool_size max_header_line "
        "wsgi_keep_alive client_socket_timeout wsgi_server_debug cafile "
        "certfile keyfile insecure timeout collect-timing split-loggers"
    ),
    "oslo_messaging_notifications": (
        "driver transport_url topics retry"
    ),
    "oslo_messaging_rabbit": (
        "amqp_durable_queues amqp_auto_delete rpc_conn_pool_size "
        "conn_pool_min_size conn_pool_ttl ssl ssl_version ssl_key_file "
        "ssl_cert_file ssl_ca_file ssl_enforce_hostname_verification "
        "ssl_enforce_fips_mode kombu_reconnect_delay kombu_reconnect_splay "
        "kombu_compression kombu_missing_consumer_retry_timeout "
        "kombu_failover_strategy rabbit_login_method rabbit_retry_interval "
        "rabbit_retry_backoff rabbit_interval_max rabbit_ha_queues "
        "rabbit_quorum_queue rabbit_transient_quorum_queue "
        "rabbit_quorum_delivery_limit rabbit_quorum_max_memory_length "
        "rabbit_quorum_max_memory_bytes rabbit_transient_queues_ttl "
        "rabbit_qos_prefetch_count heartbeat_timeout_threshold "
        "heartbeat_rate direct_mandatory_flag enable_cancel_on_failover "
        "use_queue_manager hostname processname rabbit_stream_fanout"
    ),
    "oslo_messaging_kafka": (
        "kafka_max_fetch_bytes kafka_consumer_timeout consumer_group "
        "producer_batch_timeout producer_batch_size compression_codec "
        "enable_auto_commit max_poll_records security_protocol "
        "sasl_mechanism ssl_cafile ssl_client_cert_file ssl_client_key_file "
        "ssl_client_key_password"
    ),
    "coordination": (
        "backend_url"
    ),
    "instance_failure": (
        "process_all_instances ha_enabled_instance_metadata_key"
    ),
    "host_failure": (
        "evacuate_all_instances ha_enabled_instance_metadata_key "
        "ignore_instances_in_error_state add_reserved_host_to_aggregate "
        "service_disable_reason"
    ),
    "process_failure": (
        "service_disable_reason"
    ),
    "taskflow": (
        "connection"
    ),
    "osapi_v1": (
        "extensions_blacklist extensions_whitelist project_id_regex"
    ),
    "ssl": (
        "ca_file cert_file key_file version ciphers"
    ),
    "wsgi": (
        "api_paste_config wsgi_log_format secure_proxy_ssl_header "
        "ssl_ca_file ssl_cert_file ssl_key_file tcp_keepidle "
        "default_pool_size max_header_line keep_alive client_socket_timeout"
    ),
    "oslo_middleware": (
        "max_request_body_size enable_proxy_headers_parsing "
        "http_basic_auth_user_file"
    ),
    "cors": (
        "allowed_origin allow_credentials expose_headers max_age "
        "allow_methods allow_headers"
    ),
    "healthcheck": (
        "detailed backends allowed_source_ranges ignore_proxied_requests "
        "disable_by_file_path disable_by_file_paths enable_by_file_paths"
    ),
    "oslo_middleware_tracing": (
        "enabled otlp_endpoint otlp_protocol service_name sampling_rate "
        "insecure"
    ),
    "oslo_versionedobjects": (
        "fatal_exception_format_errors"
    ),
    "database": (
        "sqlite_synchronous backend connection slave_connection "
        "asyncio_connection asyncio_slave_connection synchronous_reader "
        "mysql_sql_mode mysql_wsrep_sync_wait connection_recycle_time "
        "max_pool_size max_retries retry_interval max_overflow "
        "connection_debug connection_trace pool_timeout use_db_reconnect "
        "db_retry_interval db_inc_retry_interval db_max_retry_interval "
        "db_max_retries connection_parameters"
    ),
    "taskflow_driver_recovery_flows": (
        "host_auto_failure_recovery_tasks host_rh_failure_recovery_tasks "
        "instance_failure_recovery_tasks process_failure_recovery_tasks"
    ),
}

#: What Kolla-Ansible's masakari.conf.j2 writes besides.
KOLLA = {"DEFAULT": "enabled_apis", "oslo_concurrency": "lock_path"}


def options() -> list[tuple[str, str]]:
    """Each ``(group, option)`` of Masakari 22 and Kolla-Ansible."""
    return [(group, name)
            for table in (MASAKARI_22, KOLLA)
            for group, names in table.items() for name in names.split()]


def recovery_options() -> list[tuple[str, cfg.Opt]]:
    """Each ``(group, option)`` recovery reads, as its sample lists them."""
    found = importlib.metadata.entry_points(group="oslo.config.opts")
    pairs = []
    for namespace in NAMESPACES:
        [entry] = found.select(name=namespace)
        for group, opts in entry.load()():
            name = getattr(group, "name", group) or "DEFAULT"
            pairs += [(name, opt) for opt in opts]
    return pairs


def _key(name: str) -> str:
    return name.replace("-", "_")


def verdicts() -> dict[tuple[str, str], str]:
    """What recovery does with each Masakari option."""
    same, renamed = set(), {}
    for group, opt in recovery_options():
        same.add((group, _key(opt.name)))
        for old in opt.deprecated_opts:
            renamed[(old.group or group, _key(old.name))] = (
                f"read as [{group}] {opt.dest}")
    result = {}
    for group, name in options():
        key = (group, _key(name))
        entry = masakari.unused(group, name)
        if entry is not None:
            result[(group, name)] = f"not used: {entry.reason}"
        elif name in masakari.CREDENTIALS:
            result[(group, name)] = (
                f"[nova] {masakari.CREDENTIALS[name]} of the password auth, "
                f"when [nova] has no auth_type")
        elif name == "nova_catalog_admin_info":
            result[(group, name)] = (
                "[nova] service_type, service_name, valid_interfaces "
                "(their defaults)")
        elif key in renamed:
            result[(group, name)] = renamed[key]
        elif key in same:
            result[(group, name)] = "same name, same meaning"
    return result


def table() -> str:
    """Markdown: one row per group and verdict, the options in order."""
    found = verdicts()
    rows = ["| Masakari option | recovery |", "|---|---|"]
    grouped: dict[tuple[str, str], list[str]] = {}
    for group, name in sorted(options(),
                              key=lambda key: (key[0] != "DEFAULT", key[0])):
        verdict = found.get((group, name), "UNCLASSIFIED")
        grouped.setdefault((group, verdict), []).append(name)
    for (group, verdict), names in grouped.items():
        total = len(options_of(group))
        listed = (f"all {total}" if len(names) == total > 3
                  else ", ".join(f"`{name}`" for name in names))
        rows.append(f"| [{group}] {listed} | {verdict} |")
    return "\n".join(rows)


def options_of(group: str) -> list[str]:
    return [name for g, name in options() if g == group]


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
