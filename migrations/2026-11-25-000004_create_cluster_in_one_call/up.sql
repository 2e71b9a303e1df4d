-- A cluster's create as one call: the zone's capacity checked, then the cluster, its pools, its
-- first operation (when `operation_id` is given), the answer on the request's idempotency key and the change log row, in one
-- statement's transaction.
--
-- The same work sent statement by statement cost eight round trips (the capacity read, BEGIN,
-- five writes, COMMIT), and three of those statements (the capacity's sum, the operation's
-- upsert and the key's update) were parsed and planned on every call, since diesel prepares
-- none of them. PL/pgSQL plans each statement once per connection and runs them without a round
-- trip between them (docs/performance.md).
--
-- The rows come as JSON of the tables' own columns (`jsonb_populate_record`), so a column added
-- to `clusters` or `node_pools` needs no change here. Every constraint, trigger and unique index
-- applies as it does to the statements sent one by one; any error rolls back the whole call.
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
    capacity bigint
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
            SET state = 'completed', response_status = kubesvc_create_cluster.response_status,
                response_headers = kubesvc_create_cluster.response_headers,
                response_body = kubesvc_create_cluster.response_body
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
    RETURN true;
END
$$;
