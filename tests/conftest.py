# The database servers' fixtures (tests/databases.py), for every tier,
# and a real Ceph for the whole session (tests/ceph.py).
from tests.ceph import ceph  # noqa: F401
from tests.databases import db_url  # noqa: F401
from tests.databases import mysql_server  # noqa: F401
from tests.databases import mysql_url  # noqa: F401
from tests.databases import postgresql_server  # noqa: F401
from tests.databases import postgresql_url  # noqa: F401
