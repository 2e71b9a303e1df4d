ALTER TABLE nodes DROP COLUMN taints, DROP COLUMN labels;
ALTER TABLE node_pools DROP COLUMN taints;
