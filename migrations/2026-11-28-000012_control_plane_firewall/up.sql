-- Who may call a cluster's API server: the firewall enforced now, and the one being applied
-- (both `change` columns null when no change is in flight). Networks are CIDRs as the service
-- normalised them; enabled, the list is never empty.
ALTER TABLE clusters
    ADD COLUMN control_plane_firewall_enabled boolean NOT NULL DEFAULT false,
    ADD COLUMN control_plane_firewall_allowed text[] NOT NULL DEFAULT '{}'
        CONSTRAINT clusters_control_plane_firewall_allowed_check
            CHECK (cardinality(control_plane_firewall_allowed) <= 100),
    ADD COLUMN control_plane_firewall_change_enabled boolean,
    ADD COLUMN control_plane_firewall_change_allowed text[]
        CONSTRAINT clusters_control_plane_firewall_change_allowed_check
            CHECK (cardinality(control_plane_firewall_change_allowed) <= 100),
    ADD CONSTRAINT clusters_control_plane_firewall_check
        CHECK (NOT control_plane_firewall_enabled OR cardinality(control_plane_firewall_allowed) > 0),
    ADD CONSTRAINT clusters_control_plane_firewall_change_check
        CHECK ((control_plane_firewall_change_enabled IS NULL) = (control_plane_firewall_change_allowed IS NULL)
               AND (control_plane_firewall_change_enabled IS NOT TRUE
                    OR cardinality(control_plane_firewall_change_allowed) > 0));

-- The operations' kinds gain control_plane_firewall_change. The check is rebuilt from the kinds it
-- allows now rather than from a list written here, so a kind another migration added before
-- this one (in another line of work) is kept.
DO $$
DECLARE
    kinds text[];
BEGIN
    -- Each quoted text of the check's definition, which PostgreSQL writes either as
    -- ARRAY['a'::text, …] or as '{a,…}'::text[].
    SELECT array_agg(DISTINCT k) INTO kinds
        FROM pg_constraint AS c,
             regexp_matches(pg_get_constraintdef(c.oid), '''([^'']*)''', 'g') AS m,
             unnest(string_to_array(btrim(m[1], '{}'), ',')) AS k
        WHERE c.conname = 'cluster_operations_kind_check'
          AND c.conrelid = 'cluster_operations'::regclass;
    kinds := array_append(array_remove(kinds, 'control_plane_firewall_change'),
                          'control_plane_firewall_change');
    ALTER TABLE cluster_operations DROP CONSTRAINT cluster_operations_kind_check;
    EXECUTE format('ALTER TABLE cluster_operations ADD CONSTRAINT cluster_operations_kind_check '
                   'CHECK (kind = ANY (%L::text[]))', kinds);
END
$$;
