DELETE FROM cluster_operations WHERE kind = 'control_plane_firewall_change';
ALTER TABLE cluster_operations DROP CONSTRAINT cluster_operations_kind_check;
ALTER TABLE cluster_operations ADD CONSTRAINT cluster_operations_kind_check CHECK (kind IN
    ('create', 'delete', 'exposure_change', 'node_pool_create', 'node_pool_change',
     'node_pool_delete', 'node_replacement', 'elastic_ip_allocate', 'elastic_ip_release',
     'firewall_rule_create', 'firewall_rule_delete'));
ALTER TABLE clusters
    DROP COLUMN control_plane_firewall_change_allowed,
    DROP COLUMN control_plane_firewall_change_enabled,
    DROP COLUMN control_plane_firewall_allowed,
    DROP COLUMN control_plane_firewall_enabled;
