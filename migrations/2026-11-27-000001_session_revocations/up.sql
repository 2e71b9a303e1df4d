-- Sessions ended before their time. Console and gateway sessions live in sealed cookies, so
-- the database knows a session only once it ends early: a sign-out records its id, a "sign
-- out everywhere" records, per subject, the instant up to which every session issued is over.
-- Each row is kept until the sessions it ends would have expired anyway, then purged.
CREATE TABLE session_revocations (
    session_id uuid PRIMARY KEY,
    revoked_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE TABLE session_sign_outs (
    -- 'console:<account user id>' or 'gateway:<digest of issuer and sub>'
    subject text PRIMARY KEY,
    not_before timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX session_revocations_expires_idx ON session_revocations (expires_at);
CREATE INDEX session_sign_outs_expires_idx ON session_sign_outs (expires_at);
