-- The request that last scheduled work on the cluster (its request id), so the reconciler's
-- log lines for that work carry it and can be joined to the request's own.
ALTER TABLE operations
    ADD COLUMN request_id text CONSTRAINT operations_request_id_check CHECK (char_length(request_id) <= 128);
