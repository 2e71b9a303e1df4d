-- An idempotency key keeps what the face that served the request hands over, which the service
-- never reads: `fingerprint`, a digest of what makes two requests the same, and `replay`, the
-- bytes of the answer as that face encoded it. The rows already here are converted to what the
-- API computes for the same request now, so keys in flight across the upgrade still replay:
-- the fingerprint is the SHA-256 of method, path and body digest joined by single spaces, and
-- the replay the API's answer envelope: a version byte (1), the status (2 bytes, big-endian),
-- the length of the headers (4 bytes, big-endian), the headers as a JSON array of
-- [name, value] pairs, then the body.
--
-- During a rolling upgrade the previous release still writes the old columns: a trigger derives
-- the new ones from them. It cannot read a row this release wrote (the old columns are empty
-- there): a retry that crosses from a new replica to an old one is refused by the old one until
-- the rollout ends. The old columns and the trigger go in a later release.

ALTER TABLE idempotency_keys ADD COLUMN fingerprint bytea, ADD COLUMN replay bytea;

CREATE FUNCTION kubesvc_http_envelope(status integer, headers jsonb, body bytea) RETURNS bytea
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT '\x01'::bytea || int2send(status::int2)
        || int4send(octet_length(convert_to(headers::text, 'UTF8')))
        || convert_to(headers::text, 'UTF8') || body
$$;

UPDATE idempotency_keys
    SET fingerprint = sha256(convert_to(method || ' ' || path || ' ' || body_sha256, 'UTF8')),
        replay = CASE WHEN state = 'completed'
                      THEN kubesvc_http_envelope(response_status, response_headers, response_body)
                 END;

CREATE FUNCTION kubesvc_idempotency_from_previous_release() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.fingerprint IS NULL AND NEW.method IS NOT NULL THEN
        NEW.fingerprint := sha256(convert_to(NEW.method || ' ' || NEW.path || ' ' || NEW.body_sha256, 'UTF8'));
    END IF;
    IF NEW.replay IS NULL AND NEW.response_status IS NOT NULL THEN
        NEW.replay := kubesvc_http_envelope(NEW.response_status, NEW.response_headers, NEW.response_body);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER idempotency_keys_from_previous_release
    BEFORE INSERT OR UPDATE ON idempotency_keys
    FOR EACH ROW EXECUTE FUNCTION kubesvc_idempotency_from_previous_release();

ALTER TABLE idempotency_keys
    ALTER COLUMN fingerprint SET NOT NULL,
    ADD CONSTRAINT idempotency_keys_fingerprint_check CHECK (octet_length(fingerprint) = 32),
    ALTER COLUMN method DROP NOT NULL,
    ALTER COLUMN path DROP NOT NULL,
    ALTER COLUMN body_sha256 DROP NOT NULL,
    DROP CONSTRAINT idempotency_keys_state_fields_check,
    ADD CONSTRAINT idempotency_keys_state_fields_check CHECK (
        (state = 'in_progress' AND lease_id IS NOT NULL AND lease_expires_at IS NOT NULL)
        OR (state = 'completed' AND replay IS NOT NULL));

-- The create in one call, storing the replay on the key (the previous release's overloads stay
-- until it is gone).
CREATE FUNCTION kubesvc_create_cluster_replayed(
    cluster jsonb,
    pools jsonb,
    operation_id uuid,
    request_id text,
    key_organization uuid,
    idempotency_key text,
    lease uuid,
    replay bytea,
    capacity_zone text,
    capacity_adds bigint,
    capacity bigint,
    audit jsonb,
    cluster_operation jsonb
) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    c clusters := jsonb_populate_record(NULL::clusters, cluster);
BEGIN
    -- The write's zone capacity (none when it is NULL): the nodes the zone's live clusters ask
    -- for, as the trigger on node_pools counts them, plus what this cluster adds.
    IF capacity IS NOT NULL AND
       (SELECT coalesce(sum(u.nodes), 0) FROM zone_usage AS u WHERE u.zone = capacity_zone)
           + capacity_adds > capacity THEN
        RAISE EXCEPTION 'kubesvc: zone capacity exhausted';
    END IF;
    INSERT INTO clusters SELECT (c).*;
    INSERT INTO node_pools SELECT * FROM jsonb_populate_recordset(NULL::node_pools, pools);
    IF operation_id IS NOT NULL THEN
        INSERT INTO operations (cluster_id, id, state, generation, run_after, attempts,
                                created_at, updated_at, request_id)
            VALUES (c.id, operation_id, 'pending', 1, now(), 0, now(), now(), request_id);
    END IF;
    IF idempotency_key IS NOT NULL THEN
        UPDATE idempotency_keys AS k
            SET state = 'completed', replay = kubesvc_create_cluster_replayed.replay
            WHERE k.organization_id = key_organization AND k.key = idempotency_key
              AND k.state = 'in_progress' AND k.lease_id = lease;
        IF NOT FOUND THEN
            -- Another request took the key over: this one's answer must not be stored, so
            -- nothing of it is.
            RAISE EXCEPTION 'kubesvc: idempotency lease lost';
        END IF;
    END IF;
    INSERT INTO cluster_change_log (cluster_id, revision, organization_id, membership)
        VALUES (c.id, c.revision, c.organization_id, 'created');
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
