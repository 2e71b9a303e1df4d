CREATE INDEX audit_events_server_at_idx ON audit_events (auth_server_id, at);
