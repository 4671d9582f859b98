"""``recovery db import-masakari``: a Masakari 22 database's failover
segments, hosts and notification history (with its vmoves) brought into
recovery's store, for an operator who switches from Masakari.

The UUIDs are kept: monitors, scripts and clients that name a segment, a
host or a notification by its UUID go on working. They are the import's
key too: an entry recovery has already (same UUID, same content) is not
imported again, and one it has with other content is left as it is and
reported, never overwritten. Journal entries (Masakari's vmoves) are
keyed by their notification and instance, as recovery keys them.

Masakari's database is only read (``masakari_source``), and its rows
become recovery's (``masakari_rows``); here they are compared with what
the store has, and written, in one transaction of the store's.

Not brought over, and said so: soft-deleted rows (``deleted != 0``, which
Masakari no longer shows), and what recovery's schema cannot hold as
Masakari has it (a notification whose type and event no flow of
recovery's acts on, a vmove that is not an evacuation, a second vmove of
one instance in one notification). A notification that is still new,
running or error in Masakari is brought as history, ``ignored`` with a
message that says what Masakari had: Masakari may still be working on it
(or retry it, for error), and recovery must not start a second recovery
of the same host behind its back; ignored is a status that no engine
acts on, no safety gate counts and no segment edit waits for.
"""

import dataclasses
import datetime
from collections import Counter
from collections.abc import Mapping
from typing import Any

import prettytable
import sqlalchemy as sa

from recovery.db.masakari_rows import IMPORTED
from recovery.db.masakari_rows import JOURNAL_COMPARED
from recovery.db.masakari_rows import PRESENT
from recovery.db.masakari_rows import SKIPPED
from recovery.db.masakari_rows import Entry
from recovery.db.masakari_rows import Item
from recovery.db.masakari_rows import differences
from recovery.db.masakari_rows import host_entry
from recovery.db.masakari_rows import notification_entry
from recovery.db.masakari_rows import plural
from recovery.db.masakari_rows import segment_entry
from recovery.db.masakari_source import Source
from recovery.db.masakari_source import open_source
from recovery.db.masakari_source import read
from recovery.db.store import Store
from recovery.db.tables import hosts
from recovery.db.tables import instance_journal
from recovery.db.tables import notifications
from recovery.db.tables import segments

# Rows read per IN (...) query against recovery's store.
_CHUNK = 500


@dataclasses.dataclass
class Report:
    source: str     # the URL, without its password
    dry_run: bool
    items: list[Item] = dataclasses.field(default_factory=list)
    # Journal entries (vmoves) brought with their notifications.
    vmoves: int = 0

    @property
    def left_behind(self) -> list[Item]:
        return [i for i in self.items if i.left_behind]

    def summary(self) -> str:
        counted = Counter((i.result, i.what) for i in self.items)
        counted[IMPORTED, "vmove"] += self.vmoves
        parts = []
        for result in (IMPORTED, PRESENT, SKIPPED):
            shown = ", ".join(
                plural(counted[result, what], what)
                for what in ("segment", "host", "notification", "vmove")
                if counted[result, what])
            word = "would import" if (self.dry_run and result == IMPORTED) \
                else result
            parts.append(f"{word}: {shown or 'nothing'}")
        return "; ".join(parts)

    def render(self) -> str:
        table = prettytable.PrettyTable(
            ["What", "UUID", "Name", "Result", "Reason"])
        table.align = "l"
        table.max_width["Reason"] = 72
        for item in self.items:
            result = "would import" if (
                self.dry_run and item.result == IMPORTED) else item.result
            table.add_row([item.what, item.uuid, item.name, result,
                           item.reason])
        title = f"Masakari's database {self.source}"
        if self.dry_run:
            title += " (dry run: nothing written)"
        lines = [title, table.get_string(), self.summary()]
        left = len(self.left_behind)
        if left:
            were = "entry was" if left == 1 else "entries were"
            lines.append(f"{left} live {were} left behind: see their "
                         f"reasons above")
        return "\n".join(lines)


def run(store: Store, source: Source, *, url: str, now: datetime.datetime,
        dry_run: bool = False) -> Report:
    """Bring ``source``'s live rows into ``store``, in one transaction:
    compared with what the store has in it, so that nothing is imported
    twice even while another import runs. ``dry_run``: the same report,
    nothing written."""
    report = Report(url, dry_run)
    # The store's own transactions: the import is one more writer of its
    # tables, through the same choke point (recovery.db.transaction).
    with store._tx() as conn:
        plan = _Plan(conn, source, now, report)
        plan.segments()
        plan.hosts()
        plan.notifications()
        if not dry_run:
            plan.write()
    return report


class _Plan:
    """What to insert, decided against the store's rows in ``conn``."""

    def __init__(self, conn: sa.Connection, source: Source,
                 now: datetime.datetime, report: Report):
        self.conn, self.source, self.now = conn, source, now
        self.report = report
        self.new_segments: list[dict[str, Any]] = []
        self.new_hosts: list[dict[str, Any]] = []
        self.new_notifications: list[Entry] = []
        # Masakari's live segments that recovery has, or will have.
        self.segments_in: dict[str, str] = {}

    def _add(self, item: Item) -> None:
        self.report.items.append(item)

    def _deleted(self, what: str, uuid: str, name: str,
                 more: str = "") -> None:
        self._add(Item(what, uuid, name, SKIPPED,
                       f"soft-deleted in Masakari (not live){more}"))

    def _existing(self, table: sa.Table,
                  uuids: list[str]) -> dict[str, Any]:
        found = {}
        for start in range(0, len(uuids), _CHUNK):
            rows = self.conn.execute(table.select().where(
                table.c.uuid.in_(uuids[start:start + _CHUNK])))
            found.update({r.uuid: r._mapping for r in rows})
        return found

    def _names(self, table: sa.Table) -> dict[str, str]:
        return dict(self.conn.execute(sa.select(table.c.name,
                                                table.c.uuid)).all())

    def _place(self, entry: Entry, existing: Mapping[str, Any] | None,
               names: dict[str, str], new: list[dict[str, Any]]) -> bool:
        """Decide on a segment or host; True if recovery has it (or
        will)."""
        item = entry.item
        if existing is not None:
            differ = differences(entry.values, existing, entry.compared)
            if differ:
                self._add(dataclasses.replace(
                    item, result=SKIPPED, left_behind=True,
                    reason=f"recovery has it with other content, left as "
                           f"it is: {'; '.join(differ)}"))
            else:
                self._add(dataclasses.replace(item, result=PRESENT))
            return True
        taken = names.get(item.name)
        if taken is not None:
            self._add(dataclasses.replace(
                item, result=SKIPPED, left_behind=True,
                reason=f"recovery has another {item.what} named "
                       f"{item.name} ({taken})"))
            return False
        names[item.name] = item.uuid
        new.append(entry.values)
        self._add(item)
        return True

    def segments(self) -> None:
        rows = self.source.segments
        existing = self._existing(segments, [r.uuid for r in rows
                                             if not r.deleted])
        names = self._names(segments)
        for row in rows:
            if row.deleted:
                self._deleted("segment", row.uuid, row.name)
                continue
            if self._place(segment_entry(row, self.now),
                           existing.get(row.uuid), names, self.new_segments):
                self.segments_in[row.uuid] = row.name

    def hosts(self) -> None:
        rows = self.source.hosts
        existing = self._existing(hosts, [r.uuid for r in rows
                                          if not r.deleted])
        names = self._names(hosts)
        live = {r.uuid: r.name for r in self.source.segments
                if not r.deleted}
        for row in rows:
            if row.deleted:
                self._deleted("host", row.uuid, row.name)
            elif row.failover_segment_id not in live:
                self._deleted("host", row.uuid, row.name,
                              f": its segment {row.failover_segment_id} is")
            elif row.failover_segment_id not in self.segments_in:
                self._add(Item(
                    "host", row.uuid, row.name, SKIPPED,
                    f"its segment {live[row.failover_segment_id]} was not "
                    f"imported", left_behind=True))
            else:
                self._place(host_entry(row, live[row.failover_segment_id],
                                       self.now),
                            existing.get(row.uuid), names, self.new_hosts)

    def notifications(self) -> None:
        rows = self.source.notifications
        # A host deleted since keeps its name in its soft-deleted row.
        hostnames = {r.uuid: r.name for r in self.source.hosts}
        vmoves: dict[str, list[Any]] = {}
        deleted_vmoves: dict[str, list[Any]] = {}
        for vmove in self.source.vmoves:
            into = deleted_vmoves if vmove.deleted else vmoves
            into.setdefault(vmove.notification_uuid, []).append(vmove)
        live = [r.notification_uuid for r in rows if not r.deleted]
        existing = self._existing(notifications, live)
        journals = self._journals([u for u in live if u in existing])
        for row in rows:
            uuid = row.notification_uuid
            hostname = hostnames.get(row.source_host_uuid)
            name = f"{row.type} {hostname or row.source_host_uuid}"
            if row.deleted:
                more = len(vmoves.get(uuid, ())) + len(
                    deleted_vmoves.get(uuid, ()))
                self._deleted("notification", uuid, name, f", with its "
                              f"{plural(more, 'vmove')}" if more else "")
                continue
            for vmove in deleted_vmoves.get(uuid, ()):
                self._deleted("vmove", vmove.uuid, vmove.instance_name,
                              f", of notification {uuid}")
            if hostname is None:
                self._add(Item("notification", uuid, name, SKIPPED,
                               f"its host {row.source_host_uuid} is not in "
                               f"Masakari's database",
                               left_behind=True))
                continue
            try:
                entry = notification_entry(
                    row, hostname, vmoves.get(uuid, []), self.now)
            except ValueError as exc:
                self._add(Item("notification", uuid, name, SKIPPED,
                               str(exc), left_behind=True))
                continue
            if uuid in existing:
                self._compare(entry, existing[uuid], journals.get(uuid, {}))
            else:
                self._add(entry.item)
                self.report.vmoves += len(entry.journal)
                self.new_notifications.append(entry)
            for item in entry.skipped:
                self._add(item)

    def _journals(self, uuids: list[str]
                  ) -> dict[str, dict[str, Mapping[str, Any]]]:
        found: dict[str, dict[str, Mapping[str, Any]]] = {}
        for start in range(0, len(uuids), _CHUNK):
            rows = self.conn.execute(instance_journal.select().where(
                instance_journal.c.notification_uuid.in_(
                    uuids[start:start + _CHUNK])))
            for r in rows:
                found.setdefault(r.notification_uuid, {})[
                    r.instance_uuid] = r._mapping
        return found

    def _compare(self, entry: Entry, row: Mapping[str, Any],
                 journal: dict[str, Mapping[str, Any]]) -> None:
        differ = differences(entry.values, row, entry.compared)
        wanted = {j["instance_uuid"]: j for j in entry.journal}
        if set(wanted) != set(journal):
            differ.append(f"vmoves of instances {sorted(journal)} in "
                          f"recovery, {sorted(wanted)} in Masakari")
        else:
            for instance, values in wanted.items():
                differ.extend(
                    f"vmove of {instance}: {d}" for d in differences(
                        values, journal[instance], JOURNAL_COMPARED))
        if differ:
            self._add(dataclasses.replace(
                entry.item, result=SKIPPED, left_behind=True,
                reason=f"recovery has it with other content, left as it "
                       f"is: {'; '.join(differ)}"))
        else:
            self._add(dataclasses.replace(entry.item, result=PRESENT))

    def write(self) -> None:
        for table, values in ((segments, self.new_segments),
                              (hosts, self.new_hosts),
                              (notifications, [e.values for e in
                                               self.new_notifications]),
                              (instance_journal, [
                                  j for e in self.new_notifications
                                  for j in e.journal])):
            if values:
                self.conn.execute(table.insert(), values)


def from_url(store: Store, url: str, *, now: datetime.datetime,
             dry_run: bool = False) -> Report:
    """Import from the Masakari database at ``url`` (only read)."""
    engine = open_source(url)
    try:
        source = read(engine)
    finally:
        engine.dispose()
    return run(store, source, now=now, dry_run=dry_run,
               url=engine.url.render_as_string(hide_password=True))
