"""In recovery's image only: the module name Kolla-Ansible's masakari role
gives uWSGI, so that its ``masakari-api-uwsgi.ini`` serves recovery's API
unchanged."""
