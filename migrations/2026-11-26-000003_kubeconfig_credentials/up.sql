-- Credentials downloads asked for with a lifetime: who, when, until when, revoked or not;
-- the token itself is never stored, only its digest (keyed with SECRETS_KEY), which is what
-- the cluster's API server looks a token up by. The cluster's standing credential stays in
-- cluster_credentials, rotated in place.
CREATE TABLE kubeconfig_credentials (
    id uuid PRIMARY KEY,
    cluster_id uuid NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    organization_id uuid NOT NULL,
    token_digest text NOT NULL CONSTRAINT kubeconfig_credentials_token_digest_key UNIQUE,
    issued_to text NOT NULL,
    issued_to_email text,
    issued_to_client text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    revoked_by text,
    CONSTRAINT kubeconfig_credentials_lifetime_check CHECK (expires_at > created_at),
    CONSTRAINT kubeconfig_credentials_revoked_check CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);

CREATE INDEX kubeconfig_credentials_cluster_idx
    ON kubeconfig_credentials (cluster_id, created_at DESC, id DESC);

ALTER TABLE audit_events DROP CONSTRAINT audit_events_resource_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_resource_check CHECK (resource IN
    ('cluster', 'node_pool', 'node', 'elastic_ip', 'firewall_rule', 'auth_server', 'credential',
     'kubeconfig_credential'));
