#!/bin/bash
# Sourced by kolla_start, as the service user, before it execs the command.
# A bootstrap container (KOLLA_BOOTSTRAP set, even empty) upgrades the
# database schema and exits, as Kolla's masakari images run
# 'masakari-manage db sync'.
if [[ "${!KOLLA_BOOTSTRAP[@]}" ]]; then
    recovery --config-file "${RECOVERY_CONFIG_FILE}" db upgrade
    exit 0
fi
