"""The notification API: Masakari's ``/v1/notifications``, served by
``recovery-engine``."""
