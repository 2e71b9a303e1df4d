DELETE FROM audit_events WHERE resource = 'kubeconfig_credential';
ALTER TABLE audit_events DROP CONSTRAINT audit_events_resource_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_resource_check CHECK (resource IN
    ('cluster', 'node_pool', 'node', 'elastic_ip', 'firewall_rule', 'auth_server', 'credential'));
DROP TABLE kubeconfig_credentials;
