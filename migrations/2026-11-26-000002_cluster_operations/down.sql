DROP FUNCTION kubesvc_create_cluster(jsonb, jsonb, uuid, text, uuid, text, uuid, integer, jsonb, bytea, text, bigint, bigint, jsonb, jsonb);
CREATE FUNCTION kubesvc_create_cluster(
    cluster jsonb, pools jsonb, operation_id uuid, request_id text, key_organization uuid,
    idempotency_key text, lease uuid, response_status integer, response_headers jsonb,
    response_body bytea, capacity_zone text, capacity_adds bigint, capacity bigint, audit jsonb
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
DROP TABLE cluster_operations;
