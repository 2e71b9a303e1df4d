DELETE FROM approvals WHERE action_kind = 'upgrade_cluster';
DELETE FROM cluster_operations WHERE kind = 'upgrade';
ALTER TABLE approvals
    DROP CONSTRAINT approvals_action_kind_check,
    ADD CONSTRAINT approvals_action_kind_check CHECK (action_kind IN
        ('create_cluster', 'add_node_pool', 'scale_node_pool', 'delete_node_pool', 'delete_node',
         'delete_cluster'));
ALTER TABLE cluster_operations
    DROP COLUMN progress,
    DROP CONSTRAINT cluster_operations_kind_check,
    ADD CONSTRAINT cluster_operations_kind_check CHECK (kind IN
        ('create', 'delete', 'exposure_change', 'node_pool_create', 'node_pool_change',
         'node_pool_delete', 'node_replacement', 'elastic_ip_allocate', 'elastic_ip_release',
         'firewall_rule_create', 'firewall_rule_delete'));
ALTER TABLE nodes DROP COLUMN version;
UPDATE node_pools SET status = 'Ready' WHERE status = 'Upgrading';
ALTER TABLE node_pools
    DROP CONSTRAINT node_pools_status_check,
    ADD CONSTRAINT node_pools_status_check CHECK (status IN ('Provisioning', 'Ready', 'Scaling', 'Deleting')),
    DROP COLUMN version,
    DROP COLUMN max_surge,
    DROP COLUMN max_unavailable;
ALTER TABLE clusters
    DROP CONSTRAINT clusters_upgrade_check,
    DROP COLUMN upgrade_from,
    DROP COLUMN upgrade_to,
    DROP COLUMN upgrade_automatic,
    DROP COLUMN maintenance_day,
    DROP COLUMN maintenance_start_time,
    DROP COLUMN auto_upgrade,
    DROP COLUMN last_auto_upgrade_window;
