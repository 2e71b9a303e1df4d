-- The audit trail of every change, not only of the auth servers'.
--
-- Additive only, so a server of the previous release keeps writing its auth-server events
-- while the new one rolls out: every new column has a default or may be NULL, and the old
-- columns keep their names (`actor` is the actor's user id, `details` the changed fields).
-- An event of the previous release has no `resource_id`: its `auth_server_id` names it.
ALTER TABLE audit_events ALTER COLUMN auth_server_id DROP NOT NULL;
ALTER TABLE audit_events
    ADD COLUMN resource text NOT NULL DEFAULT 'auth_server'
        CONSTRAINT audit_events_resource_check CHECK (resource IN
            ('cluster', 'node_pool', 'node', 'elastic_ip', 'firewall_rule', 'auth_server', 'credential')),
    ADD COLUMN resource_id text,
    ADD COLUMN cluster_id uuid,
    ADD COLUMN actor_email text,
    ADD COLUMN actor_client text NOT NULL DEFAULT 'api',
    ADD COLUMN via text NOT NULL DEFAULT 'api'
        CONSTRAINT audit_events_via_check CHECK (via IN ('api', 'console')),
    ADD COLUMN request_id text,
    ADD COLUMN outcome text NOT NULL DEFAULT 'applied'
        CONSTRAINT audit_events_outcome_check CHECK (outcome IN ('applied', 'accepted'));

-- The previous release's credential events become events about the credential.
UPDATE audit_events
    SET resource = 'credential',
        resource_id = details->>'credential_id',
        action = CASE action WHEN 'credential_added' THEN 'created' ELSE 'deleted' END,
        details = details - 'credential_id'
    WHERE action IN ('credential_added', 'credential_removed');
UPDATE audit_events SET resource_id = auth_server_id::text WHERE resource_id IS NULL;

-- Reads are newest first within an organization (optionally one cluster), and go on from a
-- cursor (at, id); the purge deletes by age.
DROP INDEX audit_events_org_at_idx;
CREATE INDEX audit_events_org_at_idx ON audit_events (organization_id, at DESC, id DESC);
CREATE INDEX audit_events_cluster_at_idx ON audit_events (cluster_id, at DESC, id DESC)
    WHERE cluster_id IS NOT NULL;
CREATE INDEX audit_events_at_idx ON audit_events (at);

-- A cluster's create, now with its audit event, still in one call. The previous signature
-- stays for the previous release's servers during a rolling upgrade.
CREATE FUNCTION kubesvc_create_cluster(
    cluster jsonb,
    pools jsonb,
    operation_id uuid,
    request_id text,
    key_organization uuid,
    idempotency_key text,
    lease uuid,
    response_status integer,
    response_headers jsonb,
    response_body bytea,
    capacity_zone text,
    capacity_adds bigint,
    capacity bigint,
    audit jsonb
) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    PERFORM kubesvc_create_cluster(cluster, pools, operation_id, request_id, key_organization,
        idempotency_key, lease, response_status, response_headers, response_body,
        capacity_zone, capacity_adds, capacity);
    IF audit IS NOT NULL THEN
        INSERT INTO audit_events SELECT * FROM jsonb_populate_record(NULL::audit_events, audit);
    END IF;
    RETURN true;
END
$$;
