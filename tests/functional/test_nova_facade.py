"""The Nova facade over real HTTP: auth loading, timeouts, safe retries
and error translation, against the fake Nova (and a fake Keystone)."""

import pytest
from keystoneauth1 import loading
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery.models import Need
from recovery.nova import load_nova
from tests.fakekeystone import FakeKeystone
from tests.fakenova.placement import endpoint_for
from tests.unit.fakes import FakeClock


def make_conf(**nova_opts) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    # auth plugin options register when the plugin loads; set them after.
    auth_type = nova_opts.pop("auth_type", None)
    if auth_type:
        conf.set_override("auth_type", auth_type, "nova")
        plugin = loading.get_plugin_loader(auth_type)
        conf.register_opts(loading.get_auth_plugin_conf_options(plugin),
                           group="nova")
    for name, value in nova_opts.items():
        conf.set_override(name, value, "nova")
    return conf


def admin_token_conf(fake, **opts):
    return make_conf(auth_type="admin_token", endpoint=fake.endpoint,
                     token="admin:admin:admin", **opts)


def test_admin_token_with_endpoint(fake_nova):
    fake_nova.add_compute("compute-1")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    assert nova.get_compute_service("compute-1").host == "compute-1"


def test_none_with_endpoint_override(fake_nova):
    fake_nova.add_compute("compute-1")
    conf = make_conf(auth_type="none", endpoint_override=fake_nova.endpoint)
    nova = load_nova(conf, FakeClock())
    assert nova.get_compute_service("compute-1").state == "up"


@pytest.mark.parametrize("auth_type,opts", [
    ("password", {"username": "recovery", "password": "s3cret",
                  "project_name": "admin", "user_domain_id": "default",
                  "project_domain_id": "default"}),
    ("v3applicationcredential", {"application_credential_id": "ac1",
                                 "application_credential_secret": "s3cret"}),
])
def test_keystone_catalog_lookup(fake_nova, auth_type, opts):
    fake_nova.add_compute("compute-1")
    with FakeKeystone(fake_nova.endpoint) as keystone:
        conf = make_conf(auth_type=auth_type, auth_url=keystone.url,
                         region_name="RegionOne", **opts)
        nova = load_nova(conf, FakeClock())
        for _ in range(3):      # one session: one token for every call
            assert nova.get_compute_service("compute-1").host == "compute-1"
    tokens = [r for r in keystone.requests if r["method"] == "POST"]
    assert len(tokens) == 1


def test_wrong_region_names_the_fix(fake_nova):
    with FakeKeystone(fake_nova.endpoint) as keystone:
        conf = make_conf(auth_type="v3applicationcredential",
                         auth_url=keystone.url, region_name="Elsewhere",
                         application_credential_id="ac1",
                         application_credential_secret="x")
        nova = load_nova(conf, FakeClock())
        with pytest.raises(exception.ConfigError, match="region_name"):
            nova.get_compute_service("compute-1")


def test_no_auth_and_no_endpoint_is_a_config_error():
    with pytest.raises(exception.ConfigError, match="auth_type"):
        load_nova(make_conf(), FakeClock())


def test_errors_carry_novas_request_id(fake_nova):
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    with pytest.raises(exception.NovaNotFound, match=r"\(request req-"):
        nova.get_server("00000000-0000-0000-0000-000000000000")


def test_unknown_host(fake_nova):
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    with pytest.raises(exception.UnknownHost, match="compute service list"):
        nova.get_compute_service("nope")


def test_reads_are_retried_after_a_5xx(fake_nova):
    fake_nova.add_compute("compute-1")
    fake_nova.inject("GET", r"/os-services", status=503, times=2)
    clock = FakeClock()
    nova = load_nova(admin_token_conf(fake_nova), clock)
    assert nova.get_compute_service("compute-1").host == "compute-1"
    assert len(clock.sleeps) == 2          # backoff, on the injected clock


def test_retries_are_bounded(fake_nova):
    fake_nova.add_compute("compute-1")
    fake_nova.inject("GET", r"/os-services", status=500, times=10)
    conf = admin_token_conf(fake_nova, api_retries=2)
    with pytest.raises(exception.NovaError, match="HTTP 500"):
        load_nova(conf, FakeClock()).get_compute_service("compute-1")
    gets = [r for r in fake_nova.requests if r["path"].endswith("services")]
    assert len(gets) == 3


def test_evacuate_is_never_retried_blindly(fake_nova):
    fake_nova.add_compute("compute-1")
    fake_nova.add_compute("compute-2")
    uuid = fake_nova.add_server("vm", "compute-1")
    fake_nova.fail_host("compute-1")
    fake_nova.inject("POST", r"/action", action="evacuate", status=500)
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    with pytest.raises(exception.NovaError, match="HTTP 500"):
        nova.evacuate(uuid)
    evacuates = [r for r in fake_nova.requests if r["action"] == "evacuate"]
    assert len(evacuates) == 1


def test_every_call_has_a_timeout(fake_nova):
    fake_nova.add_compute("compute-1")
    fake_nova.inject("GET", r"/os-services", delay=3.0)
    conf = admin_token_conf(fake_nova, timeout=0.3, api_retries=0)
    with pytest.raises(exception.NovaUnreachable, match="could not reach"):
        load_nova(conf, FakeClock()).get_compute_service("compute-1")


@pytest.mark.parametrize("count,requests", [(1, 1), (4, 3), (5, 3)])
def test_evacuations_page_by_next_link(fake_nova, count, requests):
    """One request per page, a page only when Nova links one: with
    max_limit 2, 4 migrations take 2 full pages and an empty one."""
    fake_nova.max_limit = 2
    for host in ("compute-1", "compute-2"):
        fake_nova.add_compute(host)
    uuids = [fake_nova.add_server(f"vm-{n}", "compute-1")
             for n in range(count)]
    fake_nova.fail_host("compute-1")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    for uuid in uuids:
        nova.evacuate(uuid)
    fake_nova.wait_for(lambda: all(m["status"] == "done"
                                   for m in fake_nova.migrations()))
    before = len(fake_nova.requests)
    found = nova.list_evacuations("compute-1", "2000-01-01T00:00:00Z")
    assert sorted(m.instance_uuid for m in found) == sorted(uuids)
    assert len(fake_nova.requests) - before == requests


def test_a_run_s_facade_sends_nothing_once_its_lease_is_lost(fake_nova):
    """A run's Nova checks the run's lease before every request: once
    the lease is lost, nothing more reaches Nova, not even a read."""
    fake_nova.add_compute("compute-1")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    held = [True]

    def guard():
        if not held[0]:
            raise exception.LeaseLost("lease lost")

    run_nova = nova.guarded(guard)
    service = run_nova.get_compute_service("compute-1")
    sent = len(fake_nova.requests)
    held[0] = False
    with pytest.raises(exception.LeaseLost):
        run_nova.get_compute_service("compute-1")
    with pytest.raises(exception.LeaseLost):
        run_nova.force_down(service, True)
    assert len(fake_nova.requests) == sent
    # The engine's own facade, shared by every run, is not guarded.
    nova.get_compute_service("compute-1")
    assert len(fake_nova.requests) == sent + 1


def test_a_request_that_queued_while_the_lease_was_lost_is_not_sent(
        fake_nova):
    """The lease is checked again once a request has waited its turn
    under the rate limit: a process that froze while it queued sends
    nothing when it wakes up."""
    fake_nova.add_compute("compute-1")
    held = [True]

    class FreezingClock(FakeClock):
        def sleep(self, seconds):
            # Frozen while queued: the lease runs out meanwhile.
            super().sleep(seconds)
            held[0] = False

    def guard():
        if not held[0]:
            raise exception.LeaseLost("lease lost")

    conf = admin_token_conf(fake_nova, max_requests_per_second=1)
    nova = load_nova(conf, FreezingClock()).guarded(guard)
    nova.get_compute_service("compute-1")
    sent = len(fake_nova.requests)
    with pytest.raises(exception.LeaseLost):
        nova.get_compute_service("compute-1")
    assert len(fake_nova.requests) == sent


def test_the_last_check_is_at_the_socket_write(fake_nova):
    """A process that froze after its turn in the queue, somewhere in
    keystoneauth, requests or urllib3, still sends nothing when it wakes
    up past its lease; the half-used connection is not reused."""
    fake_nova.add_compute("compute-1")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    checks = []

    def guard():
        checks.append(len(checks))
        # Held for the facade's check and the session's, then lost.
        if len(checks) > 2:
            raise exception.LeaseLost("lease lost")

    service = nova.get_compute_service("compute-1")
    sent = len(fake_nova.requests)
    with pytest.raises(exception.LeaseLost):
        nova.guarded(guard).force_down(service, True)
    assert len(checks) == 3
    assert len(fake_nova.requests) == sent
    assert not nova.get_compute_service("compute-1").forced_down
    assert len(fake_nova.requests) == sent + 1


def test_free_room_is_placement_s_view_by_provider_name(fake_nova):
    """Two requests; capacity less used, per resource class."""
    fake_nova.add_compute("compute-1", capacity=4)
    fake_nova.add_compute("compute-2")
    fake_nova.add_compute("compute-3", capacity=1)
    for n in range(3):
        fake_nova.add_server(f"vm-{n}", "compute-1")
    fake_nova.add_server("full", "compute-3")
    nova = load_nova(admin_token_conf(
        fake_nova, placement_endpoint_override=endpoint_for(
            fake_nova.endpoint)), FakeClock())
    before = len(fake_nova.requests)
    room = nova.free_room()
    assert room["compute-1.localdomain"] == Need(1, 512, 1)
    assert room["compute-2.localdomain"] == Need(1000, 512000, 1000)
    # A full host is no candidate at all: it has no room.
    assert "compute-3.localdomain" not in room
    assert len(fake_nova.requests) - before == 2


def test_without_placement_free_room_is_an_error_to_go_on_from(fake_nova):
    """admin_token's one endpoint is Nova's: asked there, Placement's
    paths are not found."""
    fake_nova.add_compute("compute-1")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    with pytest.raises(exception.RecoveryError,
                       match="resource providers"):
        nova.free_room()
