DELETE FROM audit_events WHERE resource = 'approval' OR via = 'assistant';
ALTER TABLE audit_events DROP CONSTRAINT audit_events_via_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_via_check CHECK (via IN ('api', 'console'));
ALTER TABLE audit_events DROP CONSTRAINT audit_events_resource_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_resource_check CHECK (resource IN
    ('cluster', 'node_pool', 'node', 'elastic_ip', 'firewall_rule', 'auth_server', 'credential',
     'kubeconfig_credential'));
ALTER TABLE audit_events DROP COLUMN approval_id;
DROP TABLE approvals;
