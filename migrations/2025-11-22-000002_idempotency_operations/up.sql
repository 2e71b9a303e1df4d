-- Idempotency keys (CONTRACT §8) and the durable operations queue (the provisioning work).

CREATE TABLE idempotency_keys (
    organization_id uuid NOT NULL,
    key text NOT NULL CONSTRAINT idempotency_keys_key_check CHECK (key ~ '^[A-Za-z0-9_\-:.]{8,255}$'),
    method text NOT NULL CONSTRAINT idempotency_keys_method_check CHECK (method IN ('POST', 'PATCH', 'DELETE', 'PUT')),
    path text NOT NULL,
    body_sha256 text NOT NULL CONSTRAINT idempotency_keys_body_sha256_check CHECK (body_sha256 ~ '^[0-9a-f]{64}$'),
    state text NOT NULL CONSTRAINT idempotency_keys_state_check CHECK (state IN ('in_progress', 'completed')),
    -- The request holding the key; kept after completion so a late duplicate cannot complete it.
    lease_id uuid,
    lease_expires_at timestamptz,
    response_status integer CONSTRAINT idempotency_keys_response_status_check CHECK (response_status BETWEEN 100 AND 499),
    -- [[name, value], ...]: order and repeated names replay as they were.
    response_headers jsonb CONSTRAINT idempotency_keys_response_headers_check CHECK (jsonb_typeof(response_headers) = 'array'),
    response_body bytea,
    created_at timestamptz NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (organization_id, key),
    CONSTRAINT idempotency_keys_state_fields_check CHECK (
        (state = 'in_progress' AND lease_id IS NOT NULL AND lease_expires_at IS NOT NULL)
        OR (state = 'completed' AND response_status IS NOT NULL AND response_headers IS NOT NULL AND response_body IS NOT NULL))
);

-- The daily purge of keys past their 24 h.
CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);

-- One row per cluster: asking for more work while some is pending or running raises the
-- generation instead of queueing a second operation.
CREATE TABLE operations (
    cluster_id uuid PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    id uuid NOT NULL CONSTRAINT operations_id_key UNIQUE,
    state text NOT NULL CONSTRAINT operations_state_check CHECK (state IN ('pending', 'running', 'done')),
    generation bigint NOT NULL CONSTRAINT operations_generation_check CHECK (generation >= 1),
    run_after timestamptz NOT NULL,
    lease_id uuid,
    lease_expires_at timestamptz,
    leased_by text,
    attempts integer NOT NULL DEFAULT 0 CONSTRAINT operations_attempts_check CHECK (attempts >= 0),
    last_error text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT operations_lease_check CHECK (
        state <> 'running' OR (lease_id IS NOT NULL AND lease_expires_at IS NOT NULL AND leased_by IS NOT NULL))
);

-- The claim's two ways in: due pending work, and running work whose lease ran out.
CREATE INDEX operations_pending_idx ON operations (run_after) WHERE state = 'pending';
CREATE INDEX operations_running_idx ON operations (lease_expires_at) WHERE state = 'running';
