DROP TRIGGER node_pools_zone_usage ON node_pools;
DROP FUNCTION kubesvc_zone_usage();
DROP TABLE zone_usage;
