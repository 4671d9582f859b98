"""What editing failover segments and their hosts needs from the store,
for the API (``recovery.api.segments``) and the command line
(``recovery segment``). A module of its own so that the command line
need not import the API's web stack to name it."""

import datetime
from typing import Any
from typing import Protocol

from recovery.db.segments import Host
from recovery.db.segments import Segment


class SegmentCatalog(Protocol):
    """What editing failover segments and their hosts needs from the
    store: the API's and the command line's (``recovery segment``)."""
    def list_segments(self, filters: dict[str, Any] | None = None,
                      limit: int | None = None, marker: str | None = None,
                      sort_key: str = "created_at",
                      sort_dir: str = "desc") -> list[Segment]: ...
    def get_segment(self, uuid: str) -> Segment: ...
    def create_segment(self, *, name: str, recovery_method: str,
                       now: datetime.datetime,
                       description: str | None = None,
                       service_type: str = "compute",
                       enabled: bool = True) -> Segment: ...
    def update_segment(self, uuid: str, changes: dict[str, Any],
                       now: datetime.datetime) -> Segment: ...
    def delete_segment(self, uuid: str) -> None: ...
    def list_hosts(self, segment_uuid: str,
                   filters: dict[str, Any] | None = None,
                   limit: int | None = None, marker: str | None = None,
                   sort_key: str = "created_at",
                   sort_dir: str = "desc") -> list[Host]: ...
    def get_host(self, segment_uuid: str, ident: str) -> Host: ...
    def create_host(self, segment_uuid: str, *, name: str,
                    now: datetime.datetime, type: str = "COMPUTE",
                    control_attributes: str = "", reserved: bool = False,
                    on_maintenance: bool = False) -> Host: ...
    def update_host(self, segment_uuid: str, ident: str,
                    changes: dict[str, Any],
                    now: datetime.datetime) -> Host: ...
    def delete_host(self, segment_uuid: str, ident: str) -> None: ...
