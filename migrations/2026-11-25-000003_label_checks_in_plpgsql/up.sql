-- The DNS-label checks of names and tags, same rules, in PL/pgSQL instead of SQL. A CHECK that
-- calls a SQL function has that function's body parsed again by every statement that writes
-- the table: inlined when the check is prepared (kubesvc_is_dns_label) or planned at its first
-- call (kubesvc_are_dns_labels, not inlinable). A PL/pgSQL function is compiled once per
-- connection and its expressions keep their plans. Measured with pgbench on the insert of a
-- cluster with two tags (docs/performance.md). The constraints call the functions by
-- identity, so replacing the bodies is all it takes.

CREATE OR REPLACE FUNCTION kubesvc_is_dns_label(value text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
BEGIN
    RETURN length(value) BETWEEN 1 AND 63 AND value ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
END
$$;

-- Every element (of any dimension) a label; a NULL element is not one; no element is fine.
CREATE OR REPLACE FUNCTION kubesvc_are_dns_labels(value text[]) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
DECLARE
    v text;
BEGIN
    FOREACH v IN ARRAY value LOOP
        IF v IS NULL OR NOT kubesvc_is_dns_label(v) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;
