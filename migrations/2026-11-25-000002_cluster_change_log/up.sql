-- Every committed change of a cluster, written by the change's own transaction. It replaces the
-- pg_notify that each write used to send from inside its transaction: PostgreSQL holds a
-- database-wide lock from a notifying transaction's pre-commit until it ends, commit flush
-- included, so notifying writers committed one at a time. The writer now sends its notification
-- after the commit, from a transaction that writes nothing durable; this table is what makes
-- that safe. Each process's change feed reads it once a second from where it left off, so a
-- notification that was never sent (the writer died after its commit) or never heard is caught
-- up within a second.
--
-- "Where it left off" is the snapshot of its last read, not a sequence number: rows of
-- concurrent transactions become visible in commit order, not in the order their numbers were
-- drawn. The next read takes the rows of the transactions that snapshot did not see ended
-- (from its xmax on, or in its in-progress list): two lookups in the index on xid.
CREATE TABLE cluster_change_log (
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    cluster_id uuid NOT NULL,
    revision bigint NOT NULL,
    organization_id uuid NOT NULL,
    membership text NOT NULL CHECK (membership IN ('created', 'removed', 'changed'))
);

CREATE INDEX cluster_change_log_xid ON cluster_change_log (xid);
