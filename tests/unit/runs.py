"""Taking and ending runs in the store at a given time of the database's
clock, for tests about what runs recorded rather than about leases."""

from recovery.db.claims import Holder

# Long enough never to run out within a test's times.
LEASE = 10 ** 6


def take_at(store, item, owner, now):
    store.lease_clock = lambda conn: now
    return store.take(item, owner, LEASE)


def finish_at(store, taken, owner, status, message, now):
    store.lease_clock = lambda conn: now
    store.finish(taken.uuid, status, message,
                 holder=Holder(owner, taken.version, LEASE))
