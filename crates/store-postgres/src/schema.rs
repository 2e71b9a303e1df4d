//! Diesel's view of the tables the migrations in `/migrations` create (kept by hand, checked by
//! the tests that run every query against the migrated schema).

diesel::table! {
    clusters (id) {
        id -> Uuid,
        organization_id -> Uuid,
        organization_slug -> Text,
        name -> Text,
        description -> Nullable<Text>,
        tags -> Array<Text>,
        zone -> Text,
        version -> Text,
        control_plane_option_id -> Text,
        exposure -> Text,
        network_mode -> Text,
        phase -> Text,
        failure_reason -> Nullable<Text>,
        public_hostname -> Nullable<Text>,
        api_endpoint -> Nullable<Text>,
        hub_registration_status -> Text,
        hub_registration_reason -> Nullable<Text>,
        default_environment_status -> Text,
        default_environment_reason -> Nullable<Text>,
        exposure_change_to -> Nullable<Text>,
        control_plane_firewall_enabled -> Bool,
        control_plane_firewall_allowed -> Array<Text>,
        control_plane_firewall_change_enabled -> Nullable<Bool>,
        control_plane_firewall_change_allowed -> Nullable<Array<Text>>,
        revision -> Int8,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        deleted_at -> Nullable<Timestamptz>,
        upgrade_from -> Nullable<Text>,
        upgrade_to -> Nullable<Text>,
        upgrade_automatic -> Bool,
        maintenance_day -> Text,
        maintenance_start_time -> Text,
        auto_upgrade -> Bool,
        last_auto_upgrade_window -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    node_pools (cluster_id, name) {
        cluster_id -> Uuid,
        name -> Text,
        size -> Text,
        count -> Int4,
        auto_scale -> Bool,
        min_nodes -> Int4,
        max_nodes -> Nullable<Int4>,
        labels -> Jsonb,
        tags -> Jsonb,
        root_volume_size_gib -> Int4,
        status -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        version -> Text,
        max_surge -> Int4,
        max_unavailable -> Int4,
        taints -> Jsonb,
    }
}

diesel::table! {
    nodes (cluster_id, name) {
        cluster_id -> Uuid,
        name -> Text,
        pool -> Text,
        status -> Text,
        created_at -> Timestamptz,
        version -> Text,
        labels -> Jsonb,
        taints -> Jsonb,
    }
}

diesel::table! {
    elastic_ips (id) {
        id -> Uuid,
        cluster_id -> Uuid,
        name -> Nullable<Text>,
        exposure -> Text,
        status -> Text,
        address -> Text,
        failure_reason -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    firewall_rules (id) {
        id -> Uuid,
        cluster_id -> Uuid,
        name -> Nullable<Text>,
        description -> Nullable<Text>,
        direction -> Text,
        protocol -> Text,
        source_cidrs -> Array<Text>,
        port_from -> Nullable<Int4>,
        port_to -> Nullable<Int4>,
        status -> Text,
        failure_reason -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    cluster_credentials (cluster_id) {
        cluster_id -> Uuid,
        ca_certificate_pem -> Text,
        sealed_token -> Text,
    }
}

diesel::table! {
    idempotency_keys (organization_id, key) {
        organization_id -> Uuid,
        key -> Text,
        state -> Text,
        lease_id -> Nullable<Uuid>,
        lease_expires_at -> Nullable<Timestamptz>,
        fingerprint -> Bytea,
        replay -> Nullable<Bytea>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    operations (cluster_id) {
        cluster_id -> Uuid,
        id -> Uuid,
        state -> Text,
        generation -> Int8,
        run_after -> Timestamptz,
        lease_id -> Nullable<Uuid>,
        lease_expires_at -> Nullable<Timestamptz>,
        leased_by -> Nullable<Text>,
        attempts -> Int4,
        last_error -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        request_id -> Nullable<Text>,
    }
}

diesel::table! {
    auth_servers (id) {
        id -> Uuid,
        organization_id -> Uuid,
        organization_slug -> Text,
        name -> Text,
        environment -> Text,
        #[sql_name = "type"]
        kind -> Text,
        realm -> Nullable<Text>,
        issuer_url -> Nullable<Text>,
        redirect_path -> Nullable<Text>,
        client_id -> Nullable<Text>,
        client_secret_sealed -> Nullable<Text>,
        authorized_domain -> Nullable<Text>,
        username_claim -> Nullable<Text>,
        email_claim -> Nullable<Text>,
        role_claim -> Nullable<Text>,
        group_claim -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    auth_server_credentials (id) {
        id -> Uuid,
        auth_server_id -> Uuid,
        username -> Nullable<Text>,
        password_hash -> Nullable<Text>,
        token_digest -> Nullable<Text>,
        hint -> Nullable<Text>,
        position -> Int4,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    audit_events (id) {
        id -> Uuid,
        organization_id -> Uuid,
        auth_server_id -> Nullable<Uuid>,
        actor -> Text,
        action -> Text,
        details -> Jsonb,
        at -> Timestamptz,
        resource -> Text,
        resource_id -> Nullable<Text>,
        cluster_id -> Nullable<Uuid>,
        actor_email -> Nullable<Text>,
        actor_client -> Text,
        via -> Text,
        request_id -> Nullable<Text>,
        outcome -> Text,
        approval_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    /// Written by the writes; read by the change feeds with their own SQL (`change_log`).
    /// The `xid` column (xid8, filled by its default) is left out: diesel has no type for it.
    /// Diesel needs a key; the table has none (nothing looks a row up).
    cluster_change_log (cluster_id, revision) {
        cluster_id -> Uuid,
        revision -> Int8,
        organization_id -> Uuid,
        membership -> Text,
    }
}

diesel::table! {
    /// Nodes counted per zone, spread over 64 rows a zone; kept by a trigger on `node_pools`.
    zone_usage (zone, shard) {
        zone -> Text,
        nodes -> Int8,
        shard -> Int2,
    }
}

diesel::table! {
    /// One per change that handed work to provisioning; see `cluster_operations.rs`.
    cluster_operations (id) {
        id -> Uuid,
        cluster_id -> Uuid,
        organization_id -> Uuid,
        kind -> Text,
        resource -> Text,
        resource_id -> Text,
        requested_by -> Text,
        requested_by_email -> Nullable<Text>,
        requested_by_client -> Text,
        request_id -> Nullable<Text>,
        generation -> Int8,
        status -> Text,
        attempts -> Int4,
        last_error -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        finished_at -> Nullable<Timestamptz>,
        progress -> Nullable<Text>,
    }
}

diesel::table! {
    /// Credentials downloads asked for with a lifetime; see `kubeconfig_credentials.rs`.
    kubeconfig_credentials (id) {
        id -> Uuid,
        cluster_id -> Uuid,
        organization_id -> Uuid,
        token_digest -> Text,
        issued_to -> Text,
        issued_to_email -> Nullable<Text>,
        issued_to_client -> Text,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
        revoked_at -> Nullable<Timestamptz>,
        revoked_by -> Nullable<Text>,
    }
}

diesel::joinable!(node_pools -> clusters (cluster_id));
diesel::joinable!(elastic_ips -> clusters (cluster_id));
diesel::joinable!(firewall_rules -> clusters (cluster_id));
diesel::joinable!(auth_server_credentials -> auth_servers (auth_server_id));

diesel::allow_tables_to_appear_in_same_query!(
    clusters,
    node_pools,
    nodes,
    elastic_ips,
    firewall_rules,
    cluster_credentials,
    idempotency_keys,
    operations,
    auth_servers,
    auth_server_credentials,
    audit_events,
    cluster_operations,
    kubeconfig_credentials,
);

diesel::table! {
    /// Data keys sealed under the SECRETS_KEY ring; see `sealed_values.rs`.
    vault_keys (purpose) {
        purpose -> Text,
        sealed -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    /// Sessions ended by a sign-out; see `sessions.rs`.
    session_revocations (session_id) {
        session_id -> Uuid,
        revoked_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    /// Every session of a subject issued up to `not_before` is over; see `sessions.rs`.
    session_sign_outs (subject) {
        subject -> Text,
        not_before -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    /// What a person's assistant asked for; see `approvals.rs`.
    approvals (id) {
        id -> Uuid,
        organization_id -> Uuid,
        organization_slug -> Text,
        requested_by -> Text,
        requested_by_email -> Nullable<Text>,
        action_kind -> Text,
        action -> Jsonb,
        summary -> Text,
        status -> Text,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
        decided_at -> Nullable<Timestamptz>,
        outcome -> Nullable<Jsonb>,
    }
}
