-- Monthly partitions for the tables that only grow (audit events, cluster operations). This
-- migration only adds the function that makes months; converting the existing tables reads
-- them whole, so it runs at start in steps of their own transactions, writes going on
-- meanwhile (crates/store-postgres/src/partitions.rs).
--
-- Makes the partitions `<prefix>_pYYYYMM` of `parent` for `months` months from the month of
-- `from_month` (UTC), where missing. A month that would overlap an existing partition (the
-- converted table's, below its bound), or whose rows already sit in the default partition, is
-- left as it is: those rows stay where they are. Waits at most a second for each lock, so that
-- writes never queue behind it; a month not made now is made by the next call. Returns how many
-- it made.
CREATE FUNCTION kubesvc_ensure_month_partitions(
    parent regclass,
    prefix text,
    from_month timestamptz,
    months integer
) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    m timestamp := date_trunc('month', from_month AT TIME ZONE 'UTC');
    made integer := 0;
    part text;
BEGIN
    PERFORM set_config('lock_timeout', '1s', true);
    FOR i IN 1 .. months LOOP
        part := prefix || '_p' || to_char(m, 'YYYYMM');
        IF to_regclass(part) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE TABLE %I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)',
                    part, parent, (m AT TIME ZONE 'UTC'),
                    ((m + interval '1 month') AT TIME ZONE 'UTC'));
                made := made + 1;
            EXCEPTION WHEN invalid_object_definition OR check_violation OR lock_not_available THEN
                NULL;
            END;
        END IF;
        m := m + interval '1 month';
    END LOOP;
    RETURN made;
END
$$;
