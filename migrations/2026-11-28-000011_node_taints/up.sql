-- A node pool's Kubernetes taints, and the labels and taints each node carries. A node shows
-- what provisioning put on it, so a pool's change that has not reached a node yet is visible
-- as the difference, which the reconciler closes in place (no node is replaced for it).
-- Existing nodes start bare: the reconciler gives them their pool's labels and taints.
ALTER TABLE node_pools
    ADD COLUMN taints jsonb NOT NULL DEFAULT '[]'
        CONSTRAINT node_pools_taints_check CHECK (jsonb_typeof(taints) = 'array' AND jsonb_array_length(taints) <= 50);

ALTER TABLE nodes
    ADD COLUMN labels jsonb NOT NULL DEFAULT '{}'
        CONSTRAINT nodes_labels_check CHECK (jsonb_typeof(labels) = 'object'),
    ADD COLUMN taints jsonb NOT NULL DEFAULT '[]'
        CONSTRAINT nodes_taints_check CHECK (jsonb_typeof(taints) = 'array');

-- The nodes already running were never given their pool's labels (no step put them there until
-- now): a reconcile of each live cluster with a labelled pool gives them in place, as a change
-- of the labels would. A cluster whose work is running keeps it running; its worker finds the
-- raised generation and goes on.
INSERT INTO operations (cluster_id, id, state, generation, run_after, attempts, created_at, updated_at)
    SELECT labelled.cluster_id, gen_random_uuid(), 'pending', 1, now(), 0, now(), now()
    FROM (SELECT DISTINCT p.cluster_id
          FROM node_pools AS p JOIN clusters AS c ON c.id = p.cluster_id
          WHERE c.deleted_at IS NULL AND p.labels <> '{}'::jsonb) AS labelled
    ON CONFLICT (cluster_id) DO UPDATE SET
        generation = operations.generation + 1,
        state = CASE WHEN operations.state = 'running' THEN 'running' ELSE 'pending' END,
        run_after = now(),
        updated_at = now();
