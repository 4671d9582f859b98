"""``recovery db``: the store's schema (upgrade, contract, version) and
the import of Masakari's database; the commands' arguments, and what
they say of a migration."""

import argparse
import os

from recovery.db import migrate

# Masakari's database for 'db import-masakari', when --from does not name
# it: the password stays out of the process list and the shell's history.
MASAKARI_URL_VARIABLE = "MASAKARI_DATABASE_URL"


def add_parsers(commands: argparse._SubParsersAction) -> None:
    """db upgrade, contract, version and import-masakari."""
    database = commands.add_parser(
        "db", help="The store's schema.",
        description="A shared database (PostgreSQL, MariaDB/MySQL) is "
                    "created and upgraded only by 'recovery db upgrade' "
                    "and 'recovery db contract', while the engines run: "
                    "they refuse to start only on a schema they cannot "
                    "run on. An SQLite store upgrades itself on first use.")
    schema = database.add_subparsers(dest="action", required=True)
    schema.add_parser("upgrade", help="Create the schema, or upgrade it "
                                      "up to its first contract migration "
                                      "(engines of the previous release "
                                      "run on the result). Run it once, "
                                      "from one controller; a second run "
                                      "waits for the first.")
    schema.add_parser("contract", help="Apply the rest of this version's "
                                       "migrations, once every engine "
                                       "runs this release: refused while "
                                       "an engine of an older one is "
                                       "alive.")
    schema.add_parser("version", help="The schema's revision and this "
                                      "version's.")
    _add_import_masakari(schema)


def _add_import_masakari(schema: argparse._SubParsersAction) -> None:
    masakari = schema.add_parser(
        "import-masakari", help="Bring Masakari 22's segments, hosts and "
                                "notification history into the store.",
        description="Failover segments, hosts and notifications (with "
                    "their vmoves) keep their UUIDs; what the store has "
                    "already is not imported twice, nor overwritten. "
                    "Masakari's database is only read.")
    masakari.add_argument("--from", dest="source", metavar="URL",
                          default=os.environ.get(MASAKARI_URL_VARIABLE),
                          help="Masakari's database, as its [database] "
                               "connection names it (mysql+pymysql://..., "
                               "postgresql://...). Default: "
                               f"${MASAKARI_URL_VARIABLE}, which keeps its "
                               "password out of the process list and the "
                               "shell's history.")
    masakari.add_argument("--dry-run", action="store_true",
                          help="Print what would be imported and skipped, "
                               "and why; write nothing.")


def migrated(done: migrate.Migrated) -> str:
    """What a migration did, and what is left for 'db contract'."""
    said = (f"schema at {done.after} (was {done.before or 'empty'})"
            if done.before != done.after
            else f"schema at {done.after}, current")
    if done.stopped_before is None:
        return said
    return (f"{said}; stopped before contract migration "
            f"{done.stopped_before}, which engines of the previous release "
            f"cannot run on: run 'recovery db contract' once every engine "
            f"runs this release")
