"""The project's exceptions.

Each carries a message an operator can act on. Errors that come from Nova
carry Nova's request id, so they can be found in Nova's logs.
"""

import enum


class RecoveryError(Exception):
    """Base class of every error this project raises on purpose."""


class ConfigError(RecoveryError):
    """The configuration is missing or wrong."""


class NovaError(RecoveryError):
    """Nova answered with an error."""

    def __init__(self, message: str, *, status: int | None = None,
                 request_id: str | None = None):
        if request_id:
            message = f"{message} (request {request_id})"
        super().__init__(message)
        self.status = status
        self.request_id = request_id

    @property
    def uncertain(self) -> bool:
        """Worth another try: Nova may not have acted (a 5xx, or no
        answer at all)."""
        return (self.status or 0) >= 500

    @property
    def maybe_acted(self) -> bool:
        """The request's outcome is unknown: Nova may have acted on it
        (a 5xx, a timeout, a reset after the request was written). An
        answer of Nova's below 500 is a refusal: nothing happened."""
        return self.uncertain

    @property
    def in_flight(self) -> bool:
        """The request may still reach Nova later: no answer came from
        Nova itself. A 5xx with Nova's request id ended in Nova, so what
        Nova shows now is final; one without it came from something in
        front of Nova (a load balancer), which may still deliver it."""
        return self.maybe_acted and self.request_id is None


class NovaUnreachable(NovaError):
    """Nova could not be reached, or did not answer in time.
    ``not_sent``: proved never sent (the connection was refused, or not
    made in time), so Nova cannot act on it."""

    def __init__(self, message: str, *, not_sent: bool = False):
        super().__init__(message)
        self.not_sent = not_sent

    @property
    def uncertain(self) -> bool:
        return True

    @property
    def maybe_acted(self) -> bool:
        return not self.not_sent


class NovaNotFound(NovaError):
    """Nova does not know the resource (404)."""


class NovaConflict(NovaError):
    """Nova refused the action in the resource's current state (400/409)."""


class NovaForbidden(NovaError):
    """Nova refused the credentials (401) or the action (403)."""


class UnknownHost(RecoveryError):
    """No nova-compute service has this host name."""


class HostNotDown(RecoveryError):
    """Nova still reports the host's compute service up: refused for safety."""


class HostNotUp(RecoveryError):
    """A drain needs a running host: this one is down or forced down."""


class HostFailed(RecoveryError):
    """The host a drain was moving instances from stopped heartbeating:
    the drain ends, and the host is a host failure's."""


class DrainRefused(RecoveryError):
    """A drain would leave instances behind for lack of room, and
    ``--allow-partial`` was not given: nothing was changed."""


class WaitTimeout(RecoveryError):
    """A condition did not become true before its deadline."""


class InstanceRecoveryError(RecoveryError):
    """One instance could not be recovered."""


class Duplicate(RecoveryError):
    """The same notification arrived within the duplicate window."""


class NotFound(RecoveryError):
    """No such record in the store."""


class RecoveryInProgress(RecoveryError):
    """Another live process is recovering this host."""


class Interrupted(RecoveryError):
    """The run was asked to stop; what is left resumes from the journal."""


class FencingError(RecoveryError):
    """The host could not be powered off, or its power-off not verified."""


class FenceHoldCause(enum.StrEnum):
    """Why a host's fencing holds it (``FenceHeld``): nothing of it is
    evacuated until a later attempt proves it off, or an operator
    confirms it off ('recovery fencing confirm')."""

    # A power device answered (even "On", even a refusal): the host may
    # be live, so a storage fence alone never proves it off.
    BMC_ANSWERED = "bmc_answered"
    # The host answers its liveness probe on one of its addresses.
    PROBE_ANSWERED = "probe_answered"
    # No liveness probe is configured, or the host cannot be probed.
    NO_PROBE = "no_probe"
    # Too few of the live engines see the host silent.
    NO_AGREEMENT = "no_agreement"
    # Ceph still lists the host's watches of its instances' images past
    # its watch timeout: the host still talks to its storage.
    CEPH_TALKS = "ceph_talks"
    # Every level failed, and no power device could be reached at all.
    UNREACHABLE = "unreachable"
    # Any other failure of the fencing.
    FENCE_FAILED = "fence_failed"


class FenceHeld(FencingError):
    """No fencing level proved the host off: held, with its ``cause``.
    ``bmcs_unreachable``: every power device of the host was out of
    reach (none answered anything), as when its rack lost its power."""

    def __init__(self, message: str, cause: FenceHoldCause, *,
                 bmcs_unreachable: bool = False):
        super().__init__(message)
        self.cause = cause
        self.bmcs_unreachable = bmcs_unreachable


class ProbeFailed(RecoveryError):
    """The liveness probe could not ask the host (its address does not
    resolve): no proof either way."""


class EvacuationsUnfinished(RecoveryError):
    """A host cannot return while guests are still moving away from it."""


class Disarmed(RecoveryError):
    """An operator disarmed recovery: no recovery starts."""


class InUse(RecoveryError):
    """A segment or host edit would change a recovery in flight."""


class Ignored(RecoveryError):
    """Nothing to act on (e.g. a paused instance); the reason is why."""


class HostAlive(Ignored):
    """A detected host failure whose host heartbeated since: nothing to
    recover, and nothing was touched."""


class GaveUp(RecoveryError):
    """Acting again would not help (e.g. an instance in a crash loop)."""


class EvacuationFailed(InstanceRecoveryError):
    """Nova ended an evacuation failed, with the instance still on the
    failed host: another evacuate is safe. ``no_valid_host`` when the
    scheduler refused the destination (full, or unfit)."""

    def __init__(self, message: str, *, no_valid_host: bool):
        super().__init__(message)
        self.no_valid_host = no_valid_host


class SchemaMismatch(ConfigError):
    """A shared database's schema is not this version's: it needs
    'recovery db upgrade', or this controller needs upgrading."""


class StoreError(RecoveryError):
    """The store's database refused or failed an operation."""


class StoreUnavailable(StoreError):
    """The store's database cannot be reached, is locked, or timed out:
    worth another try once it is back."""


class LeaseLost(Interrupted):
    """This process no longer owns the run: its lease ran out (it froze,
    or lost the database) or another engine took the run over. It must
    not touch Nova for that run again."""


# Errors that stop a run rather than fail it: the journal could not be
# written, or this process no longer owns the run. A flow records no
# outcome for them and touches Nova no more; the run resumes from its
# journal (here, or on the engine that took it over).
STOPS_THE_RUN = (StoreError, Interrupted)
