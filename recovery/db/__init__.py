"""The store: notifications, step progress and the per-instance journal."""
