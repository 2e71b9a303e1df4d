DROP FUNCTION kubesvc_create_cluster(jsonb, jsonb, uuid, text, uuid, text, uuid, integer, jsonb, bytea, text, bigint, bigint);
