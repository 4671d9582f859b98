"""Column types the migrations share.

MySQL and MariaDB keep whole seconds in a plain DATETIME; leases, retries
and the order of events need microseconds, as SQLite and PostgreSQL keep.
"""

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql",
                                      "mariadb")
