"""Building the Nova facade from the config: ``[nova]``'s auth, catalog
entries and session options, and the keystoneauth1 adapters for
Placement and Glance that share its session and rate limit."""

from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from novaclient import client as nova_client
from oslo_config import cfg

from recovery import exception
from recovery.concurrency import Clock
from recovery.conf import masakari
from recovery.nova.compute import MICROVERSION
from recovery.nova.compute import Nova
from recovery.nova.images import Images
from recovery.nova.images import no_glance
from recovery.nova.placement import Placement
from recovery.nova.transport import RateLimitedSessionLoader
from recovery.ratelimit import RateLimiter

GROUP = "nova"


def load_nova(conf: cfg.ConfigOpts, clock: Clock, *,
              timeout: float | None = None,
              retries: int | None = None,
              rate: float | None = None,
              user_agent: str = "recovery") -> Nova:
    """Build the facade from ``[nova]``: one keystoneauth1 session, whose
    every HTTP request waits its turn under one rate limiter.

    ``timeout``, ``retries`` and ``rate`` override ``[nova]`` for callers
    that must answer quickly (the API's host check). ``user_agent`` tells
    Nova's logs which process sent each request.
    """
    # A Masakari config's Nova user and catalog entry are [nova]'s
    # defaults: before the auth loads.
    masakari.adopt(conf)
    group = conf[GROUP]
    overrides = {} if timeout is None else {"timeout": timeout}
    limiter = RateLimiter(
        group.max_requests_per_second if rate is None else rate, clock)

    def pool_size() -> int:
        # Keep a connection for every task that may be in flight at once
        # (and each host's poller), instead of opening one per request.
        # Read at each request: a reload resizes the pool.
        return conf.engine.max_concurrent_host_recoveries * (
            conf.host_failure_recovery_threads + 1)

    try:
        auth = ks_loading.load_auth_from_conf_options(conf, GROUP)
        session = RateLimitedSessionLoader().load_from_conf_options(
            conf, GROUP, auth=auth, limiter=limiter, pool_size=pool_size,
            **overrides)
    except ks_exc.ClientException as exc:
        raise exception.ConfigError(
            f"[nova] auth options are invalid: {exc}. Set [nova] auth_type "
            f"and its options (see etc/recovery.conf)") from exc
    if auth is None and not group.endpoint_override:
        raise exception.ConfigError(
            "[nova] has no auth_type and no endpoint_override: set "
            "auth_type = password (with auth_url, username, ...) or "
            "endpoint_override for a standalone Nova")
    client = nova_client.Client(
        MICROVERSION, session=session,
        endpoint_override=group.endpoint_override,
        endpoint_type=group.valid_interfaces,
        region_name=group.region_name,
        service_type=group.service_type,
        service_name=group.service_name, user_agent=user_agent,
        connect_retries=0, status_code_retries=0)
    def adapter(service_type: str, override: str | None) -> Any:
        return ks_adapter.Adapter(
            session, service_type=service_type,
            interface=group.valid_interfaces, region_name=group.region_name,
            endpoint_override=override, user_agent=user_agent,
            connect_retries=0, status_code_retries=0)

    return Nova(client, clock=clock,
                placement=Placement(adapter(
                    "placement", group.placement_endpoint_override)),
                images=Images(adapter("image", group.image_endpoint_override),
                              clock, missing=no_glance(
                                  auth, group.image_endpoint_override)),
                retries=group.api_retries if retries is None else retries)
