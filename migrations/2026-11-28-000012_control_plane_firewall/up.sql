-- Who may call a cluster's API server: the firewall enforced now, and the one being applied
-- (both `change` columns null when no change is in flight). Networks are CIDRs as the service
-- normalised them; enabled, the list is never empty.
ALTER TABLE clusters
    ADD COLUMN control_plane_firewall_enabled boolean NOT NULL DEFAULT false,
    ADD COLUMN control_plane_firewall_allowed text[] NOT NULL DEFAULT '{}'
        CONSTRAINT clusters_control_plane_firewall_allowed_check
            CHECK (cardinality(control_plane_firewall_allowed) <= 100),
    ADD COLUMN control_plane_firewall_change_enabled boolean,
    ADD COLUMN control_plane_firewall_change_allowed text[]
        CONSTRAINT clusters_control_plane_firewall_change_allowed_check
            CHECK (cardinality(control_plane_firewall_change_allowed) <= 100),
    ADD CONSTRAINT clusters_control_plane_firewall_check
        CHECK (NOT control_plane_firewall_enabled OR cardinality(control_plane_firewall_allowed) > 0),
    ADD CONSTRAINT clusters_control_plane_firewall_change_check
        CHECK ((control_plane_firewall_change_enabled IS NULL) = (control_plane_firewall_change_allowed IS NULL)
               AND (control_plane_firewall_change_enabled IS NOT TRUE
                    OR cardinality(control_plane_firewall_change_allowed) > 0));

ALTER TABLE cluster_operations DROP CONSTRAINT cluster_operations_kind_check;
ALTER TABLE cluster_operations ADD CONSTRAINT cluster_operations_kind_check CHECK (kind IN
    ('create', 'delete', 'exposure_change', 'control_plane_firewall_change', 'node_pool_create',
     'node_pool_change', 'node_pool_delete', 'node_replacement', 'elastic_ip_allocate',
     'elastic_ip_release', 'firewall_rule_create', 'firewall_rule_delete'));
