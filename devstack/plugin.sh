#!/bin/bash
# DevStack plugin for recovery: installs it from $RECOVERY_DIR, writes
# $RECOVERY_CONF, registers the instance-ha service, creates the database
# and runs recovery-engine (the API and the engine in one process) as a
# DevStack service. Settings: devstack/settings.

function install_recovery {
    setup_develop "$RECOVERY_DIR" postgresql,mysql
}

function configure_recovery {
    sudo install -d -o "$STACK_USER" "$RECOVERY_CONF_DIR"
    rm -f "$RECOVERY_CONF"
    iniset "$RECOVERY_CONF" DEFAULT debug "$ENABLE_DEBUG_LOG_LEVEL"
    iniset "$RECOVERY_CONF" DEFAULT host_failure_recovery_threads \
        "$RECOVERY_THREADS"
    iniset "$RECOVERY_CONF" api host "$RECOVERY_SERVICE_HOST"
    iniset "$RECOVERY_CONF" api port "$RECOVERY_SERVICE_PORT"
    iniset "$RECOVERY_CONF" api auth_strategy keystone
    configure_keystone_authtoken_middleware "$RECOVERY_CONF" \
        "$RECOVERY_SERVICE_USER"
    iniset "$RECOVERY_CONF" database connection \
        "$(database_connection_url "$RECOVERY_DATABASE")"
    iniset "$RECOVERY_CONF" nova auth_type password
    iniset "$RECOVERY_CONF" nova auth_url "$KEYSTONE_SERVICE_URI"
    iniset "$RECOVERY_CONF" nova username "$RECOVERY_SERVICE_USER"
    iniset "$RECOVERY_CONF" nova password "$SERVICE_PASSWORD"
    iniset "$RECOVERY_CONF" nova project_name "$SERVICE_PROJECT_NAME"
    iniset "$RECOVERY_CONF" nova user_domain_name "$SERVICE_DOMAIN_NAME"
    iniset "$RECOVERY_CONF" nova project_domain_name "$SERVICE_DOMAIN_NAME"
    iniset "$RECOVERY_CONF" nova region_name "$REGION_NAME"
}

function create_recovery_accounts {
    create_service_user "$RECOVERY_SERVICE_USER" admin
    get_or_create_service masakari instance-ha \
        "OpenStack High Availability (recovery)"
    get_or_create_endpoint instance-ha "$REGION_NAME" \
        "$RECOVERY_SERVICE_PROTOCOL://$RECOVERY_SERVICE_HOST:$RECOVERY_SERVICE_PORT/v1/\$(tenant_id)s"
}

function init_recovery {
    recreate_database "$RECOVERY_DATABASE"
    recovery --config-file "$RECOVERY_CONF" db upgrade
}

function start_recovery {
    run_process recovery-engine \
        "$(which recovery-engine) --config-file $RECOVERY_CONF"
}

function stop_recovery {
    stop_process recovery-engine
}

if is_service_enabled recovery-engine; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        install_recovery
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        configure_recovery
        create_recovery_accounts
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        init_recovery
        start_recovery
    fi
    if [[ "$1" == "unstack" ]]; then
        stop_recovery
    fi
    if [[ "$1" == "clean" ]]; then
        sudo rm -rf "$RECOVERY_CONF_DIR"
    fi
fi
