DROP TABLE session_sign_outs;
DROP TABLE session_revocations;
