-- Back to one row per zone (the function of the zone_usage migration).
DELETE FROM zone_usage;
ALTER TABLE zone_usage DROP CONSTRAINT zone_usage_pkey;
ALTER TABLE zone_usage DROP COLUMN shard;
ALTER TABLE zone_usage ADD PRIMARY KEY (zone);

CREATE OR REPLACE FUNCTION kubesvc_zone_usage() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    before_n bigint := 0;
    after_n bigint := 0;
    cid uuid;
    z text;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status <> 'Deleting' THEN
        before_n := OLD.count;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status <> 'Deleting' THEN
        after_n := NEW.count;
    END IF;
    IF after_n = before_n THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN cid := OLD.cluster_id; ELSE cid := NEW.cluster_id; END IF;
    SELECT c.zone INTO z FROM clusters c WHERE c.id = cid;
    IF z IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE zone_usage SET nodes = nodes + (after_n - before_n) WHERE zone = z;
    IF NOT FOUND THEN
        INSERT INTO zone_usage (zone, nodes) VALUES (z, after_n - before_n)
        ON CONFLICT (zone) DO UPDATE SET nodes = zone_usage.nodes + EXCLUDED.nodes;
    END IF;
    RETURN NULL;
END
$$;

INSERT INTO zone_usage (zone, nodes)
SELECT c.zone, sum(p.count)
FROM node_pools p JOIN clusters c ON c.id = p.cluster_id
WHERE c.deleted_at IS NULL AND p.status <> 'Deleting'
GROUP BY c.zone;

DROP FUNCTION kubesvc_zone_shard(uuid);
