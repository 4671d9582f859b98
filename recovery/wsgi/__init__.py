"""WSGI entry points, for a WSGI server (uWSGI, mod_wsgi, gunicorn) to
load: ``recovery.wsgi.api:application``."""
