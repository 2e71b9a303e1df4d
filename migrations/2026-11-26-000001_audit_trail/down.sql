DROP FUNCTION kubesvc_create_cluster(jsonb, jsonb, uuid, text, uuid, text, uuid, integer, jsonb, bytea, text, bigint, bigint, jsonb);
DROP INDEX audit_events_at_idx;
DROP INDEX audit_events_cluster_at_idx;
DROP INDEX audit_events_org_at_idx;
DELETE FROM audit_events WHERE auth_server_id IS NULL;
ALTER TABLE audit_events
    DROP COLUMN resource,
    DROP COLUMN resource_id,
    DROP COLUMN cluster_id,
    DROP COLUMN actor_email,
    DROP COLUMN actor_client,
    DROP COLUMN via,
    DROP COLUMN request_id,
    DROP COLUMN outcome;
ALTER TABLE audit_events ALTER COLUMN auth_server_id SET NOT NULL;
CREATE INDEX audit_events_org_at_idx ON audit_events (organization_id, at);
