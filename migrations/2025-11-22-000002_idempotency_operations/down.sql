DROP TABLE operations;
DROP TABLE idempotency_keys;
