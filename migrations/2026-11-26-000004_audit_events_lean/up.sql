-- Nothing reads the audit trail by auth server (reads go by organization, optionally one
-- cluster, and the purge by age), so this index only cost every event an entry: a create
-- writes an event, so creates paid for it (docs/performance.md).
DROP INDEX audit_events_server_at_idx;
