"""``masakari.wsgi.api:application`` is recovery's API
(``recovery.wsgi.api:application``, reading ``$RECOVERY_CONFIG_FILE``,
/etc/masakari/masakari.conf in the image)."""

from recovery.wsgi.api import application

__all__ = ["application"]
