CREATE OR REPLACE FUNCTION kubesvc_is_dns_label(value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT length(value) BETWEEN 1 AND 63 AND value ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' $$;

CREATE OR REPLACE FUNCTION kubesvc_are_dns_labels(value text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT coalesce(bool_and(kubesvc_is_dns_label(v) IS TRUE), true) FROM unnest(value) AS v $$;
