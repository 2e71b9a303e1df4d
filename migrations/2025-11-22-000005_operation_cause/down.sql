ALTER TABLE operations DROP COLUMN request_id;
