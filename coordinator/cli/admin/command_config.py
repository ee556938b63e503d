"""How the admin commands reach a secured listener: Kafka's `--command-config FILE` and variables.

The file is a Java properties file as kafka-consumer-groups.sh takes it:

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="admin" password="secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/ca.pem

Also understood: `sasl.username`/`sasl.password` (librdkafka's names), `ssl.ca.location`,
`ssl.certificate.location`, `ssl.key.location`, `ssl.key.password` (librdkafka), `ssl.keystore.*`
with type PEM, and `ssl.endpoint.identification.algorithm=` (empty: no host name check). Java
key stores (JKS, PKCS12) cannot be read here and are refused by name.

Environment variables override the file: COORDINATOR_ADMIN_SECURITY_PROTOCOL,
COORDINATOR_ADMIN_SASL_MECHANISM, COORDINATOR_ADMIN_USERNAME, COORDINATOR_ADMIN_PASSWORD,
COORDINATOR_ADMIN_PASSWORD_FILE, COORDINATOR_ADMIN_SSL_CAFILE, COORDINATOR_ADMIN_SSL_CERTFILE,
COORDINATOR_ADMIN_SSL_KEYFILE; COORDINATOR_ADMIN_COMMAND_CONFIG names the file itself.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from coordinator.cli.admin.errors import UsageError

PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ENV_PREFIX: Final = "COORDINATOR_ADMIN_"

_PROPERTY = re.compile(r"([^=:\s]+)\s*(?:[=:]\s*|\s+|$)(.*)")
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))""")
_JAAS_MODULES: Final = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}


@dataclass(frozen=True, slots=True)
class Security:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cafile=self.cafile)
            context.check_hostname = self.check_hostname
            if self.certfile:
                context.load_cert_chain(self.certfile, self.keyfile, self.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"cannot set up TLS: {exc}") from exc
        return context


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file: key=value or key: value, # and ! comments, backslash continuations."""
    properties: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = _PROPERTY.fullmatch(logical)
        if match is not None:
            properties[match.group(1)] = match.group(2)
        logical = ""
    return properties


def _jaas(config: str) -> tuple[str, dict[str, str]]:
    module = config.strip().split(None, 1)[0] if config.strip() else ""
    if module not in _JAAS_MODULES:
        raise UsageError(
            f"sasl.jaas.config: login module {module or '(none)'!r} is not supported "
            f"(use {' or '.join(_JAAS_MODULES)})"
        )
    options = {
        m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
        for m in _JAAS_OPTION.finditer(config)
    }
    return _JAAS_MODULES[module], options


def _read_secret_file(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise UsageError(f"cannot read {what} from {path}: {exc.strerror or exc}") from exc


def _value(field: str, value: str) -> dict[str, Any]:
    return {field: value}


def from_properties(properties: Mapping[str, str], source: str) -> Security:
    security = Security()
    protocol = properties.get("security.protocol")
    if protocol is not None:
        security = replace(security, protocol=protocol.strip().upper())
    mechanism = properties.get("sasl.mechanism")
    if mechanism is not None:
        security = replace(security, mechanism=mechanism.strip().upper())
    if "sasl.jaas.config" in properties:
        _module, options = _jaas(properties["sasl.jaas.config"])
        security = replace(security, username=options.get("username"), password=options.get("password"))
    for key, field in (("sasl.username", "username"), ("sasl.password", "password")):
        if key in properties:
            security = replace(security, **_value(field, properties[key]))
    for store in ("truststore", "keystore"):
        kind = properties.get(f"ssl.{store}.type", "").strip().upper()
        if f"ssl.{store}.location" in properties and kind != "PEM":
            raise UsageError(
                f"{source}: ssl.{store}.location needs ssl.{store}.type=PEM here (Java key stores "
                f"such as {kind or 'JKS'} cannot be read; convert them to PEM files)"
            )
    files = {
        "cafile": ("ssl.truststore.location", "ssl.ca.location"),
        "certfile": ("ssl.keystore.location", "ssl.certificate.location"),
        "keyfile": ("ssl.key.location",),
        "key_password": ("ssl.key.password", "ssl.keystore.password"),
    }
    for field, keys in files.items():
        for key in keys:
            if properties.get(key):
                security = replace(security, **_value(field, properties[key]))
    if "ssl.endpoint.identification.algorithm" in properties:
        security = replace(
            security, check_hostname=properties["ssl.endpoint.identification.algorithm"].strip() != ""
        )
    return security


def from_environment(security: Security, environ: Mapping[str, str]) -> Security:
    fields = {
        "SECURITY_PROTOCOL": "protocol",
        "SASL_MECHANISM": "mechanism",
        "USERNAME": "username",
        "PASSWORD": "password",
        "SSL_CAFILE": "cafile",
        "SSL_CERTFILE": "certfile",
        "SSL_KEYFILE": "keyfile",
    }
    for name, field in fields.items():
        value = environ.get(ENV_PREFIX + name)
        if value:
            upper = field in ("protocol", "mechanism")
            security = replace(security, **_value(field, value.upper() if upper else value))
    password_file = environ.get(ENV_PREFIX + "PASSWORD_FILE")
    if password_file:
        security = replace(security, password=_read_secret_file(password_file, "the password"))
    return security


def load_security(command_config: str | None, environ: Mapping[str, str]) -> Security:
    """The file (--command-config, else COORDINATOR_ADMIN_COMMAND_CONFIG), then the variables."""
    path = command_config or environ.get(ENV_PREFIX + "COMMAND_CONFIG")
    security = Security()
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read the command config {path}: {exc.strerror or exc}") from exc
        security = from_properties(parse_properties(text), path)
    security = from_environment(security, environ)
    return check(security)


def check(security: Security) -> Security:
    if security.protocol not in PROTOCOLS:
        raise UsageError(f"security.protocol {security.protocol!r} is not one of {', '.join(PROTOCOLS)}")
    if security.uses_sasl:
        if security.mechanism not in MECHANISMS:
            raise UsageError(f"sasl.mechanism {security.mechanism!r} is not one of {', '.join(MECHANISMS)}")
        if not security.username or security.password is None:
            raise UsageError(
                f"security.protocol {security.protocol} needs a user name and a password (sasl.jaas.config, "
                f"or {ENV_PREFIX}USERNAME and {ENV_PREFIX}PASSWORD / {ENV_PREFIX}PASSWORD_FILE)"
            )
    return security
