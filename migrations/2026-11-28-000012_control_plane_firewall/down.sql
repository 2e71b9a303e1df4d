DELETE FROM cluster_operations WHERE kind = 'control_plane_firewall_change';
-- The check loses this kind only, as the up migration added it.
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
    ALTER TABLE cluster_operations DROP CONSTRAINT cluster_operations_kind_check;
    EXECUTE format('ALTER TABLE cluster_operations ADD CONSTRAINT cluster_operations_kind_check '
                   'CHECK (kind = ANY (%L::text[]))',
                   array_remove(kinds, 'control_plane_firewall_change'));
END
$$;
ALTER TABLE clusters
    DROP COLUMN control_plane_firewall_change_allowed,
    DROP COLUMN control_plane_firewall_change_enabled,
    DROP COLUMN control_plane_firewall_allowed,
    DROP COLUMN control_plane_firewall_enabled;
