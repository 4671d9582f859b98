"""Instances journaled in the retired ``resetting`` phase resume as locked.

Recovery no longer resets a stuck task_state before evacuating: Nova
evacuates whatever the task_state. An instance a crashed run left in
``resetting`` had been locked and not yet evacuated, which is exactly what
``locking`` means to a resumed run.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Contract: the previous release journals instances in the 'resetting' phase,
# which this one no longer knows (and this migration rewrites rows its
# runs may be in the middle of).
change = "contract"


def upgrade() -> None:
    op.execute("UPDATE instance_journal SET phase = 'locking' "
                "WHERE phase = 'resetting'")
