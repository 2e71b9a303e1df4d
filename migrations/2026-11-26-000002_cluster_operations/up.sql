-- The operations clients follow: one row per change that handed work to provisioning, written
-- in the change's transaction and settled when the reconcile of its generation finishes.
-- `generation` is the generation of the cluster's row in `operations` (the work queue) that the
-- change raised it to, so a finished reconcile settles exactly the changes it carried out.
CREATE TABLE cluster_operations (
    id uuid PRIMARY KEY,
    cluster_id uuid NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    organization_id uuid NOT NULL,
    kind text NOT NULL CONSTRAINT cluster_operations_kind_check CHECK (kind IN
        ('create', 'delete', 'exposure_change', 'node_pool_create', 'node_pool_change',
         'node_pool_delete', 'node_replacement', 'elastic_ip_allocate', 'elastic_ip_release',
         'firewall_rule_create', 'firewall_rule_delete')),
    resource text NOT NULL,
    resource_id text NOT NULL,
    requested_by text NOT NULL,
    requested_by_email text,
    requested_by_client text NOT NULL,
    request_id text,
    generation bigint NOT NULL,
    status text NOT NULL CONSTRAINT cluster_operations_status_check CHECK (status IN
        ('running', 'succeeded', 'failed', 'cancelled')),
    attempts integer NOT NULL DEFAULT 0 CONSTRAINT cluster_operations_attempts_check CHECK (attempts >= 0),
    last_error text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    finished_at timestamptz,
    CONSTRAINT cluster_operations_finished_check CHECK ((status = 'running') = (finished_at IS NULL))
);

CREATE INDEX cluster_operations_cluster_idx ON cluster_operations (cluster_id, created_at DESC, id DESC);
CREATE INDEX cluster_operations_open_idx ON cluster_operations (cluster_id, generation)
    WHERE status = 'running';
CREATE INDEX cluster_operations_finished_idx ON cluster_operations (finished_at)
    WHERE finished_at IS NOT NULL;

-- The create, still one call, now with its operation (generation 1, the queue row it makes).
-- The overload with the audit event alone was never part of a release: it goes.
DROP FUNCTION kubesvc_create_cluster(jsonb, jsonb, uuid, text, uuid, text, uuid, integer, jsonb, bytea, text, bigint, bigint, jsonb);
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
    audit jsonb,
    cluster_operation jsonb
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
    IF cluster_operation IS NOT NULL THEN
        INSERT INTO cluster_operations
            SELECT * FROM jsonb_populate_record(NULL::cluster_operations, cluster_operation);
    END IF;
    RETURN true;
END
$$;
