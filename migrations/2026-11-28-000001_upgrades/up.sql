-- Kubernetes upgrades and the maintenance policy.
--
-- A cluster's `version` stays the control plane's; an upgrade in flight is `upgrade_from` →
-- `upgrade_to`. Each pool records the version its nodes run (or move to while `Upgrading`) and
-- how far it may go above and below its count while nodes are replaced; each node the version
-- it runs. Existing pools and nodes run their cluster's version.
ALTER TABLE clusters
    ADD COLUMN upgrade_from text,
    ADD COLUMN upgrade_to text,
    ADD COLUMN upgrade_automatic boolean NOT NULL DEFAULT false,
    ADD COLUMN maintenance_day text NOT NULL DEFAULT 'any'
        CONSTRAINT clusters_maintenance_day_check CHECK (maintenance_day IN
            ('any', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday')),
    ADD COLUMN maintenance_start_time text NOT NULL DEFAULT '00:00'
        CONSTRAINT clusters_maintenance_start_time_check
        CHECK (maintenance_start_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
    ADD COLUMN auto_upgrade boolean NOT NULL DEFAULT false,
    ADD COLUMN last_auto_upgrade_window timestamptz,
    ADD CONSTRAINT clusters_upgrade_check CHECK ((upgrade_from IS NULL) = (upgrade_to IS NULL)
        AND (upgrade_to IS NULL OR upgrade_to <> ''));

ALTER TABLE node_pools
    ADD COLUMN version text,
    ADD COLUMN max_surge integer NOT NULL DEFAULT 1
        CONSTRAINT node_pools_max_surge_check CHECK (max_surge BETWEEN 1 AND 10),
    ADD COLUMN max_unavailable integer NOT NULL DEFAULT 0
        CONSTRAINT node_pools_max_unavailable_check CHECK (max_unavailable BETWEEN 0 AND 10);
UPDATE node_pools AS p SET version = c.version FROM clusters AS c WHERE c.id = p.cluster_id;
ALTER TABLE node_pools
    ALTER COLUMN version SET NOT NULL,
    ADD CONSTRAINT node_pools_version_check CHECK (version <> ''),
    DROP CONSTRAINT node_pools_status_check,
    ADD CONSTRAINT node_pools_status_check
        CHECK (status IN ('Provisioning', 'Ready', 'Scaling', 'Upgrading', 'Deleting'));

ALTER TABLE nodes ADD COLUMN version text;
UPDATE nodes AS n SET version = p.version
    FROM node_pools AS p WHERE p.cluster_id = n.cluster_id AND p.name = n.pool;
-- A node whose pool is gone runs its cluster's version.
UPDATE nodes AS n SET version = c.version
    FROM clusters AS c WHERE c.id = n.cluster_id AND n.version IS NULL;
ALTER TABLE nodes
    ALTER COLUMN version SET NOT NULL,
    ADD CONSTRAINT nodes_version_check CHECK (version <> '');

-- The last step provisioning took for an operation, in a customer's words (an upgrade's
-- progress: the control plane, then each pool's nodes).
ALTER TABLE cluster_operations
    ADD COLUMN progress text,
    DROP CONSTRAINT cluster_operations_kind_check,
    ADD CONSTRAINT cluster_operations_kind_check CHECK (kind IN
        ('create', 'delete', 'exposure_change', 'node_pool_create', 'node_pool_change',
         'node_pool_delete', 'node_replacement', 'elastic_ip_allocate', 'elastic_ip_release',
         'firewall_rule_create', 'firewall_rule_delete', 'upgrade'));

ALTER TABLE approvals
    DROP CONSTRAINT approvals_action_kind_check,
    ADD CONSTRAINT approvals_action_kind_check CHECK (action_kind IN
        ('create_cluster', 'add_node_pool', 'scale_node_pool', 'delete_node_pool', 'delete_node',
         'delete_cluster', 'upgrade_cluster'));
