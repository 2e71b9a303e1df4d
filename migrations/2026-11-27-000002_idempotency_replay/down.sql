DROP FUNCTION kubesvc_create_cluster_replayed(jsonb, jsonb, uuid, text, uuid, text, uuid, bytea, text, bigint, bigint, jsonb, jsonb);
DROP TRIGGER idempotency_keys_from_previous_release ON idempotency_keys;
DROP FUNCTION kubesvc_idempotency_from_previous_release();
-- Keys this release wrote have no old columns to go back to.
DELETE FROM idempotency_keys WHERE method IS NULL OR (state = 'completed' AND response_status IS NULL);
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_state_fields_check,
    ADD CONSTRAINT idempotency_keys_state_fields_check CHECK (
        (state = 'in_progress' AND lease_id IS NOT NULL AND lease_expires_at IS NOT NULL)
        OR (state = 'completed' AND response_status IS NOT NULL AND response_headers IS NOT NULL AND response_body IS NOT NULL)),
    ALTER COLUMN method SET NOT NULL,
    ALTER COLUMN path SET NOT NULL,
    ALTER COLUMN body_sha256 SET NOT NULL,
    DROP CONSTRAINT idempotency_keys_fingerprint_check,
    DROP COLUMN fingerprint,
    DROP COLUMN replay;
DROP FUNCTION kubesvc_http_envelope(integer, jsonb, bytea);
