-- Clusters and everything under them. The database holds the domain's rules too (names,
-- enums, ranges, uniqueness), so no race between two requests can slip past them.

CREATE FUNCTION kubesvc_is_dns_label(value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT length(value) BETWEEN 1 AND 63 AND value ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' $$;

CREATE FUNCTION kubesvc_are_dns_labels(value text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT coalesce(bool_and(kubesvc_is_dns_label(v) IS TRUE), true) FROM unnest(value) AS v $$;

CREATE TABLE clusters (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    organization_slug text NOT NULL,
    name text NOT NULL CONSTRAINT clusters_name_check CHECK (kubesvc_is_dns_label(name)),
    description text,
    tags text[] NOT NULL DEFAULT '{}'
        CONSTRAINT clusters_tags_check CHECK (array_ndims(tags) IS NULL OR (array_ndims(tags) = 1 AND kubesvc_are_dns_labels(tags))),
    zone text NOT NULL CONSTRAINT clusters_zone_check CHECK (zone <> ''),
    version text NOT NULL CONSTRAINT clusters_version_check CHECK (version <> ''),
    control_plane_option_id text NOT NULL,
    exposure text NOT NULL CONSTRAINT clusters_exposure_check CHECK (exposure IN ('public', 'private')),
    network_mode text NOT NULL CONSTRAINT clusters_network_mode_check CHECK (network_mode IN ('intranet', 'internet')),
    phase text NOT NULL CONSTRAINT clusters_phase_check
        CHECK (phase IN ('Pending', 'Provisioning', 'ControlPlaneReady', 'Provisioned', 'Failed', 'Deleting')),
    failure_reason text,
    public_hostname text,
    api_endpoint text,
    hub_registration_status text NOT NULL CONSTRAINT clusters_hub_registration_status_check
        CHECK (hub_registration_status IN ('pending', 'ready', 'failed')),
    hub_registration_reason text CONSTRAINT clusters_hub_registration_reason_check
        CHECK (hub_registration_reason IN ('organization quota exceeded', 'name or address conflict in the service hub',
            'registration rejected by the service hub', 'waiting for the service platform installation',
            'Door platform installation failed')),
    default_environment_status text NOT NULL CONSTRAINT clusters_default_environment_status_check
        CHECK (default_environment_status IN ('pending', 'ready', 'failed')),
    default_environment_reason text CONSTRAINT clusters_default_environment_reason_check
        CHECK (default_environment_reason IN ('organization quota exceeded', 'name or address conflict in the service hub',
            'registration rejected by the service hub', 'waiting for the service platform installation',
            'Door platform installation failed')),
    -- The target of the exposure change in flight; null when none is.
    exposure_change_to text CONSTRAINT clusters_exposure_change_to_check CHECK (exposure_change_to IN ('public', 'private')),
    -- The long-poll version and the optimistic-concurrency token: raised by every change.
    revision bigint NOT NULL CONSTRAINT clusters_revision_check CHECK (revision >= 1),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- Set once deletion completed: a tombstone, gone for every read, its name free again.
    deleted_at timestamptz
);

CREATE UNIQUE INDEX clusters_org_name_live_key ON clusters (organization_id, name) WHERE deleted_at IS NULL;
CREATE INDEX clusters_org_list_idx ON clusters (organization_id, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX clusters_org_zone_list_idx ON clusters (organization_id, zone, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX clusters_zone_live_idx ON clusters (zone) WHERE deleted_at IS NULL;

-- Children cascade from their cluster: clusters are tombstoned, not deleted, so a cascade only
-- runs when an operator purges tombstones, and then nothing may be left behind.
CREATE TABLE node_pools (
    cluster_id uuid NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    name text NOT NULL CONSTRAINT node_pools_name_check CHECK (kubesvc_is_dns_label(name)),
    size text NOT NULL CONSTRAINT node_pools_size_check CHECK (size <> ''),
    count integer NOT NULL CONSTRAINT node_pools_count_check CHECK (count BETWEEN 0 AND 200),
    auto_scale boolean NOT NULL,
    min_nodes integer NOT NULL CONSTRAINT node_pools_min_nodes_check CHECK (min_nodes BETWEEN 0 AND 200),
    max_nodes integer CONSTRAINT node_pools_max_nodes_check CHECK (max_nodes BETWEEN 1 AND 200),
    labels jsonb NOT NULL DEFAULT '{}' CONSTRAINT node_pools_labels_check CHECK (jsonb_typeof(labels) = 'object'),
    tags jsonb NOT NULL DEFAULT '{}' CONSTRAINT node_pools_tags_check CHECK (jsonb_typeof(tags) = 'object'),
    root_volume_size_gib integer NOT NULL CONSTRAINT node_pools_root_volume_check CHECK (root_volume_size_gib >= 1),
    status text NOT NULL CONSTRAINT node_pools_status_check CHECK (status IN ('Provisioning', 'Ready', 'Scaling', 'Deleting')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT node_pools_pkey PRIMARY KEY (cluster_id, name),
    CONSTRAINT node_pools_min_max_check CHECK (max_nodes IS NULL OR min_nodes <= max_nodes),
    CONSTRAINT node_pools_auto_scale_check CHECK (NOT auto_scale OR max_nodes IS NOT NULL),
    CONSTRAINT node_pools_count_positive_check CHECK (auto_scale OR count >= 1 OR status = 'Deleting')
);

-- A pool's nodes go with it: deleting a pool means its deletion has completed.
CREATE TABLE nodes (
    cluster_id uuid NOT NULL,
    name text NOT NULL CONSTRAINT nodes_name_check
        CHECK (length(name) <= 254 AND name ~ '^[a-z0-9][-a-z0-9.]{0,252}[a-z0-9]$'),
    pool text NOT NULL,
    status text NOT NULL CONSTRAINT nodes_status_check CHECK (status IN ('Provisioning', 'Ready', 'Deleting')),
    created_at timestamptz NOT NULL,
    CONSTRAINT nodes_pkey PRIMARY KEY (cluster_id, name),
    CONSTRAINT nodes_pool_fkey FOREIGN KEY (cluster_id, pool) REFERENCES node_pools (cluster_id, name) ON DELETE CASCADE
);

CREATE INDEX nodes_pool_idx ON nodes (cluster_id, pool, name);

CREATE TABLE elastic_ips (
    id uuid PRIMARY KEY,
    cluster_id uuid NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    name text CONSTRAINT elastic_ips_name_check CHECK (kubesvc_is_dns_label(name)),
    exposure text NOT NULL CONSTRAINT elastic_ips_exposure_check CHECK (exposure IN ('public', 'private')),
    status text NOT NULL CONSTRAINT elastic_ips_status_check
        CHECK (status IN ('Pending', 'Provisioning', 'Ready', 'Failed', 'Deleting', 'Deleted')),
    -- Dotted IPv4 text as Rust prints it, so equal addresses are equal strings.
    address text NOT NULL CONSTRAINT elastic_ips_address_check
        CHECK (address ~ '^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$'),
    failure_reason text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- An address is held by one alive Elastic IP of its pool; a Deleted one gives it back.
CREATE UNIQUE INDEX elastic_ips_exposure_address_key ON elastic_ips (exposure, address) WHERE status <> 'Deleted';
CREATE UNIQUE INDEX elastic_ips_cluster_name_key ON elastic_ips (cluster_id, name)
    WHERE name IS NOT NULL AND status <> 'Deleted';
CREATE INDEX elastic_ips_cluster_list_idx ON elastic_ips (cluster_id, created_at, id);

CREATE TABLE firewall_rules (
    id uuid PRIMARY KEY,
    cluster_id uuid NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    name text CONSTRAINT firewall_rules_name_check CHECK (kubesvc_is_dns_label(name)),
    description text,
    direction text NOT NULL CONSTRAINT firewall_rules_direction_check CHECK (direction IN ('ingress')),
    protocol text NOT NULL CONSTRAINT firewall_rules_protocol_check CHECK (protocol IN ('tcp', 'udp', 'icmp')),
    source_cidrs text[] NOT NULL CONSTRAINT firewall_rules_source_cidrs_check
        CHECK (array_ndims(source_cidrs) = 1 AND cardinality(source_cidrs) BETWEEN 1 AND 16),
    port_from integer CONSTRAINT firewall_rules_port_from_check CHECK (port_from BETWEEN 1 AND 65535),
    port_to integer CONSTRAINT firewall_rules_port_to_check CHECK (port_to BETWEEN 1 AND 65535),
    status text NOT NULL CONSTRAINT firewall_rules_status_check CHECK (status IN ('Pending', 'Active', 'Deleting', 'Failed')),
    failure_reason text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- tcp and udp need a port range (from <= to); icmp has none.
    CONSTRAINT firewall_rules_ports_check CHECK (
        (protocol = 'icmp' AND port_from IS NULL AND port_to IS NULL)
        OR (protocol <> 'icmp' AND port_from IS NOT NULL AND port_to IS NOT NULL AND port_from <= port_to))
);

CREATE UNIQUE INDEX firewall_rules_cluster_name_key ON firewall_rules (cluster_id, name) WHERE name IS NOT NULL;
CREATE INDEX firewall_rules_cluster_list_idx ON firewall_rules (cluster_id, created_at, id);

CREATE TABLE cluster_credentials (
    cluster_id uuid PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    ca_certificate_pem text NOT NULL,
    -- Sealed with the service's key; never the plain token.
    sealed_token text NOT NULL
);
