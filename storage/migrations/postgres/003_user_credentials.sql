-- SASL/SCRAM credentials (RFC 5802): salt, iteration count and the derived keys; never a password.

CREATE TABLE user_credentials (
    user_name  text    NOT NULL,
    mechanism  text    NOT NULL,
    salt       bytea   NOT NULL,
    stored_key bytea   NOT NULL,
    server_key bytea   NOT NULL,
    iterations integer NOT NULL,
    PRIMARY KEY (user_name, mechanism)
);
