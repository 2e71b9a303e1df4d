-- Gateway auth servers, their credentials and the audit trail of their changes.

CREATE TABLE auth_servers (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    organization_slug text NOT NULL,
    name text NOT NULL CONSTRAINT auth_servers_name_check CHECK (kubesvc_is_dns_label(name)),
    environment text NOT NULL CONSTRAINT auth_servers_environment_check CHECK (kubesvc_is_dns_label(environment)),
    type text NOT NULL CONSTRAINT auth_servers_type_check CHECK (type IN ('oidc', 'basic', 'token')),
    realm text,
    issuer_url text,
    redirect_path text,
    client_id text,
    -- Sealed with the service's key; never the plain secret.
    client_secret_sealed text,
    authorized_domain text,
    username_claim text,
    email_claim text,
    role_claim text,
    group_claim text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT auth_servers_oidc_fields_check CHECK (
        (type = 'oidc') = (issuer_url IS NOT NULL AND redirect_path IS NOT NULL AND client_id IS NOT NULL
            AND client_secret_sealed IS NOT NULL AND authorized_domain IS NOT NULL)),
    CONSTRAINT auth_servers_realm_check CHECK (realm IS NULL OR type = 'basic')
);

CREATE UNIQUE INDEX auth_servers_org_env_name_key ON auth_servers (organization_id, environment, name);
CREATE INDEX auth_servers_org_list_idx ON auth_servers (organization_id, created_at, id);

-- A server's credentials go with it.
CREATE TABLE auth_server_credentials (
    id uuid PRIMARY KEY,
    auth_server_id uuid NOT NULL REFERENCES auth_servers (id) ON DELETE CASCADE,
    username text,
    password_hash text,
    token_digest text,
    hint text,
    -- Keeps the order the domain gave them in.
    position integer NOT NULL CONSTRAINT auth_server_credentials_position_check CHECK (position >= 0),
    created_at timestamptz NOT NULL,
    CONSTRAINT auth_server_credentials_kind_check CHECK (
        (username IS NOT NULL AND password_hash IS NOT NULL AND token_digest IS NULL AND hint IS NULL)
        OR (username IS NULL AND password_hash IS NULL AND token_digest IS NOT NULL AND hint IS NOT NULL)),
    CONSTRAINT auth_server_credentials_username_key UNIQUE (auth_server_id, username),
    CONSTRAINT auth_server_credentials_token_digest_key UNIQUE (auth_server_id, token_digest)
);

-- No foreign key to auth_servers: the trail outlives the server it tells about.
CREATE TABLE audit_events (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    auth_server_id uuid NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    details jsonb NOT NULL,
    at timestamptz NOT NULL
);

CREATE INDEX audit_events_org_at_idx ON audit_events (organization_id, at);
CREATE INDEX audit_events_server_at_idx ON audit_events (auth_server_id, at);
