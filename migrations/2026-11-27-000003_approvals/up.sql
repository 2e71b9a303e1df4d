-- Approvals: a change a person's AI assistant asked for, which runs only once that person
-- approves it. `action` holds the asked-for input as the service wrote it (docs/assistant.md);
-- `outcome` what became of the action once it ran.
CREATE TABLE approvals (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    organization_slug text NOT NULL,
    requested_by text NOT NULL,
    requested_by_email text,
    action_kind text NOT NULL CONSTRAINT approvals_action_kind_check CHECK (action_kind IN
        ('create_cluster', 'add_node_pool', 'scale_node_pool', 'delete_node_pool', 'delete_node',
         'delete_cluster')),
    action jsonb NOT NULL,
    summary text NOT NULL,
    status text NOT NULL CONSTRAINT approvals_status_check CHECK (status IN
        ('pending', 'approved', 'declined', 'expired')),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    decided_at timestamptz,
    outcome jsonb,
    CONSTRAINT approvals_decided_check CHECK ((status = 'pending') = (decided_at IS NULL)),
    CONSTRAINT approvals_outcome_check CHECK (outcome IS NULL OR status = 'approved')
);

-- A person's approvals, newest first; the sweep of the pending ones whose time ran out.
CREATE INDEX approvals_requested_by_idx ON approvals (requested_by, created_at DESC, id DESC);
CREATE INDEX approvals_pending_idx ON approvals (expires_at) WHERE status = 'pending';

-- Audit events about approvals, changes made through the assistant, and the approval a change
-- ran from. The constraints are replaced without a long lock on a large table: added NOT VALID
-- (checked for new rows at once), then validated without blocking writes.
ALTER TABLE audit_events ADD COLUMN approval_id uuid;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_resource_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_resource_check CHECK (resource IN
    ('cluster', 'node_pool', 'node', 'elastic_ip', 'firewall_rule', 'auth_server', 'credential',
     'kubeconfig_credential', 'approval')) NOT VALID;
ALTER TABLE audit_events VALIDATE CONSTRAINT audit_events_resource_check;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_via_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_via_check
    CHECK (via IN ('api', 'console', 'assistant')) NOT VALID;
ALTER TABLE audit_events VALIDATE CONSTRAINT audit_events_via_check;
