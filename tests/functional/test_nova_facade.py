"""The Nova facade over real HTTP: auth loading, timeouts, safe retries
and error translation, against the fake Nova (and a fake Keystone)."""

import http.server
import logging
import threading

import pytest
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import evacuable
from recovery import exception
from recovery.models import Need
from recovery.nova import images as nova_images
from recovery.nova import load_nova
from recovery.nova import transport
from recovery.nova.images import IMAGE_RETRY_AFTER
from tests.fakekeystone import FakeKeystone
from tests.fakenova import glance
from tests.fakenova.placement import endpoint_for
from tests.fakenova.server import wait_until
from tests.fakenova.state import IMAGE_ID
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


def test_isolate_forces_down_and_disables_in_one_request(fake_nova):
    fake_nova.add_compute("compute-1")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    service = nova.get_compute_service("compute-1")
    answer = nova.isolate(service, "host down")
    assert (answer.forced_down, answer.is_down, answer.status,
            answer.disabled_reason) == (True, True, "disabled", "host down")
    puts = [r for r in fake_nova.requests if r["method"] == "PUT"]
    assert [r["path"] for r in puts] == [f"/v2.1/os-services/{service.id}"]


def test_isolate_leaves_an_existing_disable_as_it_is(fake_nova):
    fake_nova.add_compute("compute-1")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    service = nova.get_compute_service("compute-1")
    nova.disable(service, "maintenance")
    answer = nova.isolate(service, None)
    assert (answer.forced_down, answer.status, answer.disabled_reason) == (
        True, "disabled", "maintenance")


def test_migrations_carry_nova_s_stamps(fake_nova):
    fake_nova.add_compute("compute-1")
    fake_nova.add_compute("compute-2")
    uuid = fake_nova.add_server("vm", "compute-1")
    fake_nova.fail_host("compute-1")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    nova.force_down(nova.get_compute_service("compute-1"), True)
    nova.evacuate(uuid)
    migration = wait_until(
        lambda: next((m for m in nova.list_evacuations(instance_uuid=uuid)
                      if m.status == "done"), None), 10, what="done")
    assert migration.created_at <= migration.updated_at
    assert migration.duration >= 0


def image_requests(fake):
    return [r["path"] for r in fake.requests
            if r["path"].startswith(glance.PREFIX)]


def glance_conf(fake):
    return admin_token_conf(
        fake, image_endpoint_override=glance.endpoint_for(fake.endpoint))


def test_an_image_s_vtpm_is_read_from_glance_once(fake_nova):
    """Nova lists no image properties: Glance's, one request per image
    for the process, whichever listing asks; a show only looks them
    up."""
    fake_nova.add_compute("compute-1")
    tpm_image = fake_nova.add_image({"hw_tpm_version": "2.0",
                                     "os_distro": "debian"})
    tpm = fake_nova.add_server("tpm", "compute-1", image_id=tpm_image)
    plain = fake_nova.add_server("plain", "compute-1")
    nova = load_nova(glance_conf(fake_nova), FakeClock())
    # Not read yet: a show does not ask Glance.
    assert evacuable.blocking(nova.get_server(tpm)) is None
    assert image_requests(fake_nova) == []
    servers = {s.id: s for s in nova.list_servers("compute-1")}
    assert servers[tpm].specs.image == {"hw_tpm_version": "2.0"}
    assert evacuable.blocking(servers[tpm]) is not None
    assert evacuable.blocking(servers[plain]) is None
    assert sorted(image_requests(fake_nova)) == sorted(
        f"{glance.PREFIX}/v2/images/{i}" for i in (tpm_image, IMAGE_ID))
    nova.list_all_servers()
    assert evacuable.blocking(nova.get_server(tpm)) is not None
    assert len(image_requests(fake_nova)) == 2
    # Nova refuses it, which recovery now never asks.
    with pytest.raises(exception.NovaConflict, match="vTPM"):
        nova.evacuate(tpm)


def test_a_server_s_disks_as_nova_shows_them(fake_nova):
    """Booted from a volume ("image": ""), with volumes attached, and a
    flavor's ephemeral and swap disks: what a storage fence's coverage
    is judged on. Glance is not asked for a server with no image."""
    fake_nova.add_compute("compute-1")
    bfv = fake_nova.add_server("bfv", "compute-1", image_id=None,
                               volumes=("vol-1", "vol-2"))
    local = fake_nova.add_server("local", "compute-1", ephemeral_gb=10,
                                 swap_mb=512)
    nova = load_nova(glance_conf(fake_nova), FakeClock())
    servers = {s.id: s for s in nova.list_servers("compute-1")}
    assert (servers[bfv].image_id, servers[bfv].volume_ids) == (
        None, ("vol-1", "vol-2"))
    assert (servers[bfv].ephemeral_gb, servers[bfv].swap_mb) == (0, 0)
    assert servers[local].image_id == IMAGE_ID
    assert servers[local].volume_ids == ()
    assert (servers[local].ephemeral_gb, servers[local].swap_mb) == (10, 512)
    assert nova.get_server(bfv).volume_ids == ("vol-1", "vol-2")
    assert image_requests(fake_nova) == [
        f"{glance.PREFIX}/v2/images/{IMAGE_ID}"]


def test_an_image_gone_from_glance_has_no_properties(fake_nova):
    """Nova judges by what it saved at boot: the instance is tried."""
    fake_nova.add_compute("compute-1")
    image = fake_nova.add_image({"hw_tpm_version": "2.0"})
    fake_nova.add_server("tpm", "compute-1", image_id=image)
    fake_nova.delete_image(image)
    nova = load_nova(glance_conf(fake_nova), FakeClock())
    [server] = nova.list_servers("compute-1")
    assert evacuable.blocking(server) is None
    nova.list_servers("compute-1")
    assert image_requests(fake_nova).count(
        f"{glance.PREFIX}/v2/images/{image}") == 1


def test_glance_failing_is_asked_again_only_after_a_while(fake_nova,
                                                           caplog):
    fake_nova.add_compute("compute-1")
    image = fake_nova.add_image({"hw_tpm_version": "2.0"})
    fake_nova.add_server("tpm", "compute-1", image_id=image)
    fake_nova.add_server("other", "compute-1")
    fake_nova.inject("GET", f"^{glance.PREFIX}/", status=503)
    clock = FakeClock()
    nova = load_nova(glance_conf(fake_nova), clock)
    assert not any(evacuable.blocking(s)
                   for s in nova.list_servers("compute-1"))
    assert "Images' properties not read for 60s" in caplog.text
    nova.list_servers("compute-1")
    # The first image failed: neither it nor the other was asked again.
    assert len(image_requests(fake_nova)) == 1
    clock.sleep(IMAGE_RETRY_AFTER)
    assert sum(evacuable.blocking(s) is not None
               for s in nova.list_servers("compute-1")) == 1
    assert len(image_requests(fake_nova)) == 3


def test_an_image_refused_leaves_the_others_read(fake_nova, caplog):
    """An image Glance refuses (403) is that image's problem: the others
    are read, and it is asked again next time."""
    fake_nova.add_compute("compute-1")
    image = fake_nova.add_image({"hw_tpm_version": "2.0"})
    fake_nova.add_server("tpm", "compute-1", image_id=image)
    fake_nova.add_server("other", "compute-1")
    first = sorted([image, IMAGE_ID])[0]
    fake_nova.inject("GET", f"^{glance.PREFIX}/v2/images/{first}$",
                     status=403)
    nova = load_nova(glance_conf(fake_nova), FakeClock())
    nova.list_servers("compute-1")
    assert f"Image {first}'s properties not read" in caplog.text
    assert len(image_requests(fake_nova)) == 2
    servers = nova.list_servers("compute-1")
    assert sum(evacuable.blocking(s) is not None for s in servers) == 1
    assert len(image_requests(fake_nova)) == 3


def test_one_url_for_every_service_is_no_glance(fake_nova, caplog):
    """admin_token gives Nova's URL for Glance too: no image is asked
    there, and the log says why, once."""
    fake_nova.add_compute("compute-1")
    fake_nova.add_server("vm", "compute-1")
    caplog.set_level(logging.INFO, "recovery.nova")
    nova = load_nova(admin_token_conf(fake_nova), FakeClock())
    before = len(fake_nova.requests)
    nova.list_servers("compute-1")
    nova.list_servers("compute-1")
    assert len(fake_nova.requests) - before == 2      # the listings only
    assert caplog.text.count("Images' properties are not read") == 1
    assert "image_endpoint_override is not set" in caplog.text


def test_an_image_read_has_a_timeout_of_its_own(fake_nova, caplog,
                                                monkeypatch):
    """Glance slower than the reads' time costs that time, not [nova]
    timeout, and no retry."""
    monkeypatch.setattr(nova_images, "IMAGE_TIMEOUT", 1.2)
    fake_nova.add_compute("compute-1")
    fake_nova.add_server("vm", "compute-1")
    fake_nova.inject("GET", f"^{glance.PREFIX}/", delay=2)
    conf = glance_conf(fake_nova)
    conf.set_override("timeout", 30, "nova")
    nova = load_nova(conf, FakeClock())
    [server] = nova.list_servers("compute-1")
    assert server.specs.image == {}
    assert "Images' properties not read for 60s" in caplog.text
    assert "timed out" in caplog.text.lower()
    # The fake records it once it has waited: one request, no retry.
    fake_nova.wait_for(lambda: image_requests(fake_nova), timeout=5)
    assert len(image_requests(fake_nova)) == 1


def test_an_answer_that_is_no_image_is_glance_failing(fake_nova, caplog):
    """An override that names something else (a portal answering 200
    with a page) is reported, and no recovery fails on it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        fake_nova.add_compute("compute-1")
        fake_nova.add_server("vm", "compute-1")
        conf = admin_token_conf(
            fake_nova, image_endpoint_override=(
                f"http://127.0.0.1:{server.server_port}"))
        nova = load_nova(conf, FakeClock())
        [listed] = nova.list_servers("compute-1")
        assert listed.specs.image == {}
        assert "the answer is not an image" in caplog.text
    finally:
        server.shutdown()
        server.server_close()


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        page = b"<html>Welcome</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args):
        pass


def test_a_lost_lease_is_not_taken_for_glance_failing(fake_nova):
    """A run that lost its lease stops at the image read as at any
    request; Glance is not held against the process's other runs."""
    fake_nova.add_compute("compute-1")
    image = fake_nova.add_image({"hw_tpm_version": "2.0"})
    fake_nova.add_server("tpm", "compute-1", image_id=image)
    nova = load_nova(glance_conf(fake_nova), FakeClock())
    before = len(fake_nova.requests)

    def guard():
        # The listing passes; the lease is lost once Nova answered it.
        if len(fake_nova.requests) > before:
            raise exception.LeaseLost("the lease ran out")

    with pytest.raises(exception.LeaseLost):
        nova.guarded(guard).list_servers("compute-1")
    assert any(evacuable.blocking(s)
               for s in nova.list_servers("compute-1"))


def test_no_catalog_is_a_config_error():
    error = transport.translate(
        "show image x", ks_exc.MissingAuthPlugin("no plugin"))
    assert isinstance(error, exception.ConfigError)
    assert "image_endpoint_override (Glance)" in str(error)


def test_a_catalog_without_glance_is_said_once(fake_nova, caplog):
    """Keystone's catalog names Nova only: no image is asked for, one
    line says why, and the listings go on."""
    fake_nova.add_compute("compute-1")
    fake_nova.add_server("vm", "compute-1")
    caplog.set_level(logging.INFO, "recovery.nova")
    with FakeKeystone(fake_nova.endpoint) as keystone:
        conf = make_conf(auth_type="password", auth_url=keystone.url,
                         region_name="RegionOne", username="recovery",
                         password="s3cret", project_name="admin",
                         user_domain_id="default",
                         project_domain_id="default")
        nova = load_nova(conf, FakeClock())
        for _ in range(2):
            [server] = nova.list_servers("compute-1")
            assert server.specs.image == {}
    assert caplog.text.count("Images' properties are not read: no "
                             "endpoint to show image") == 1
    assert "Images' properties not read for" not in caplog.text
    assert image_requests(fake_nova) == []


@pytest.mark.parametrize("suffix", ["", "/", "/v2", "/v2/"])
def test_glance_is_found_by_its_root_or_its_v2_api(fake_nova, suffix):
    """Catalogs name Glance's endpoint either way: ``/v2`` is added only
    to the root, never twice."""
    fake_nova.add_compute("compute-1")
    image = fake_nova.add_image({"hw_tpm_version": "2.0"})
    fake_nova.add_server("tpm", "compute-1", image_id=image)
    url = glance.endpoint_for(fake_nova.endpoint) + suffix
    with FakeKeystone(fake_nova.endpoint,
                      endpoints={"image": url}) as keystone:
        conf = make_conf(auth_type="password", auth_url=keystone.url,
                         region_name="RegionOne", username="recovery",
                         password="s3cret", project_name="admin",
                         user_domain_id="default",
                         project_domain_id="default")
        [server] = load_nova(conf, FakeClock()).list_servers("compute-1")
    assert server.specs.image == {"hw_tpm_version": "2.0"}
    assert image_requests(fake_nova) == [
        f"{glance.PREFIX}/v2/images/{image}"]


def test_a_reload_resizes_the_connection_pool(fake_nova, tmp_path):
    """The pool keeps a connection for each task that may be in flight:
    max_concurrent_host_recoveries x (host_failure_recovery_threads + 1).
    A reload (SIGHUP) that changes them resizes it at the next request."""
    fake_nova.add_compute("compute-1")
    path = tmp_path / "recovery.conf"

    def write(threads: int) -> None:
        path.write_text(
            f"[DEFAULT]\nhost_failure_recovery_threads = {threads}\n"
            f"[engine]\nmax_concurrent_host_recoveries = 2\n"
            f"[nova]\nauth_type = admin_token\n"
            f"endpoint = {fake_nova.endpoint}\ntoken = admin:admin:admin\n")

    def pool_size() -> int:
        nova.get_compute_service("compute-1")
        url = fake_nova.endpoint
        adapter = nova._client.client.session.session.get_adapter(url)
        return adapter.poolmanager.connection_from_url(url).pool.maxsize

    write(threads=1)
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(["--config-file", str(path)])
    nova = load_nova(conf, FakeClock())
    assert pool_size() == 4
    write(threads=3)
    conf.mutate_config_files()
    assert pool_size() == 8


def test_the_images_kept_are_bounded(fake_nova, monkeypatch):
    """Past the bound, the image used least recently goes, and is read
    again when needed; one listing still has every image it read."""
    monkeypatch.setattr(nova_images, "IMAGE_CACHE_SIZE", 1)
    fake_nova.add_compute("compute-1")
    for name in ("a", "b"):
        fake_nova.add_server(name, "compute-1", image_id=fake_nova.add_image(
            {"hw_tpm_version": "2.0"}))
    nova = load_nova(glance_conf(fake_nova), FakeClock())
    for reads in (2, 3):
        servers = nova.list_servers("compute-1")
        assert all(evacuable.blocking(s) is not None for s in servers)
        assert len(image_requests(fake_nova)) == reads
