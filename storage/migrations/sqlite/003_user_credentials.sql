-- SASL/SCRAM credentials (RFC 5802): salt, iteration count and the derived keys; never a password.

CREATE TABLE user_credentials (
    user_name  TEXT    NOT NULL,
    mechanism  TEXT    NOT NULL,
    salt       BLOB    NOT NULL,
    stored_key BLOB    NOT NULL,
    server_key BLOB    NOT NULL,
    iterations INTEGER NOT NULL,
    PRIMARY KEY (user_name, mechanism)
) STRICT;
