DROP TABLE audit_events;
DROP TABLE auth_server_credentials;
DROP TABLE auth_servers;
