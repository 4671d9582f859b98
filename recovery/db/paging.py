"""One page of a sorted listing, by keyset: the rows after the marker's
(sort value, id), so a page never repeats or skips a row that another
engine inserts between two requests."""

from typing import Any

import sqlalchemy as sa

from recovery import exception


def page(conn: Any, query: Any, table: sa.Table, *, sort_key: str,
         sort_dir: str, marker: str | None, marker_where: Any,
         limit: int | None) -> Any:
    """``query`` ordered by ``sort_key`` (then id, the same way), from
    after the row ``marker_where`` selects; ``NotFound`` names a marker
    that selects none. ``sort_key`` must be a column without NULLs."""
    column = table.c[sort_key]
    key = sa.tuple_(column, table.c.id)
    if sort_dir == "desc":
        query = query.order_by(column.desc(), table.c.id.desc())
    else:
        query = query.order_by(column.asc(), table.c.id.asc())
    if marker is not None:
        anchor = conn.execute(
            sa.select(column, table.c.id).where(marker_where)).first()
        if anchor is None:
            raise exception.NotFound(f"marker {marker} not found")
        query = query.where(key < tuple(anchor) if sort_dir == "desc"
                            else key > tuple(anchor))
    if limit is not None:
        query = query.limit(limit)
    return conn.execute(query)


def by_id_or(table: sa.Table, marker: str, *others: Any) -> Any:
    """A marker is an item's id (what openstacksdk sends) or one of
    ``others``' values (its uuid, or its name)."""
    if marker.isascii() and marker.isdigit() and int(marker) < 2 ** 63:
        return table.c.id == int(marker)
    return sa.or_(*(column == marker for column in others))
