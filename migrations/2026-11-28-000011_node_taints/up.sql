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
