-- Data keys the service keeps sealed under the SECRETS_KEY ring. One purpose today, the key of
-- the token digests: a digest cannot be recomputed without its token, so its key must outlive
-- any one SECRETS_KEY. The first process to start writes the key it has always used (derived
-- from the SECRETS_KEY of that day); the previous release, which derives it the same way, keeps
-- working beside it during a rolling upgrade. A re-seal rewrites `sealed` like any other
-- sealed value.
CREATE TABLE vault_keys (
    purpose text PRIMARY KEY,
    sealed text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
