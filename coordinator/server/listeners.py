"""Listeners: where the server accepts connections, with which security protocol, and what it
advertises to the clients that arrive there.

Kafka's settings, same syntax:

* ``listeners`` = ``NAME://host:port,...`` (e.g. ``PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093``).
  Empty (the default): one listener on ``--host``/``--port`` speaking ``security.protocol``.
* ``advertised.listeners`` = the same list with the addresses clients should use (per listener
  name); a listener missing there advertises its own address (127.0.0.1 for a wildcard host).
* ``listener.security.protocol.map`` = ``NAME:PROTOCOL,...`` for listener names that are not
  themselves protocol names (``INTERNAL:SSL``).

A client connected to a listener is told that listener's advertised address in Metadata,
FindCoordinator and DescribeCluster, as a Kafka broker does.

TLS (SSL and SASL_SSL listeners) takes PEM files, named like the Python clients' settings:
``ssl.certfile`` (server certificate chain), ``ssl.keyfile`` (its private key),
``ssl.keyfile.password`` (optional), ``ssl.cafile`` (CAs trusted for client certificates) and
Kafka's ``ssl.client.auth`` = ``none`` (default) | ``requested`` | ``required``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Final

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ListenerError(ValueError):
    """A listener setting cannot be parsed; the message names it."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    security_protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int | None  # None: the port actually bound (listening on port 0)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def _split_endpoint(text: str, setting: str) -> tuple[str, str, int]:
    name, sep, rest = text.strip().partition("://")
    if not sep or not name:
        raise ListenerError(f"{setting}: {text!r} is not NAME://host:port")
    host, colon, port_text = rest.rpartition(":")
    if not colon:
        raise ListenerError(f"{setting}: {text!r} has no port")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ListenerError(f"{setting}: {text!r} has an invalid port") from None
    if not 0 <= port <= 65535:
        raise ListenerError(f"{setting}: port {port} is not a TCP port")
    return name.strip().upper(), host, port


def _protocol_map(text: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, colon, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not colon or protocol not in SECURITY_PROTOCOLS:
            raise ListenerError(
                f"listener.security.protocol.map: {item!r} is not NAME:{'|'.join(SECURITY_PROTOCOLS)}"
            )
        mapping[name.strip().upper()] = protocol
    return mapping


def _advertise(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def parse_listeners(
    listeners: str,
    advertised_listeners: str,
    protocol_map: str,
    *,
    default_host: str,
    default_port: int,
    default_protocol: str,
    advertised_host: str | None = None,
    advertised_port: int | None = None,
) -> list[Listener]:
    """The listeners of a configuration, the first one being the "main" one (logged first)."""
    mapping = _protocol_map(protocol_map)
    protocol = default_protocol.strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ListenerError(
            f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, not {default_protocol!r}"
        )
    if not listeners.strip():
        port = advertised_port if advertised_port is not None else (default_port or None)
        host = advertised_host or _advertise(default_host)
        return [Listener(protocol, protocol, default_host, default_port, host, port)]
    advertised: dict[str, tuple[str, int]] = {}
    for item in filter(None, (part.strip() for part in advertised_listeners.split(","))):
        name, host, port = _split_endpoint(item, "advertised.listeners")
        advertised[name] = (host, port)
    result: list[Listener] = []
    for item in filter(None, (part.strip() for part in listeners.split(","))):
        name, host, port = _split_endpoint(item, "listeners")
        if any(existing.name == name for existing in result):
            raise ListenerError(f"listeners: listener name {name} appears twice")
        security = mapping.get(name) or (name if name in SECURITY_PROTOCOLS else None)
        if security is None:
            raise ListenerError(
                f"listeners: {name} is not a security protocol; map it in listener.security.protocol.map"
            )
        ad_host, ad_port = advertised.get(name, (_advertise(host), port))
        result.append(Listener(name, security, host, port, ad_host, ad_port or None))
    unknown = set(advertised) - {listener.name for listener in result}
    if unknown:
        raise ListenerError(f"advertised.listeners names unknown listeners: {', '.join(sorted(unknown))}")
    return result


_CLIENT_AUTH: Final = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_ssl_context(
    certfile: str, keyfile: str, cafile: str, client_auth: str, password: str = ""
) -> ssl.SSLContext:
    """The TLS context of SSL/SASL_SSL listeners (TLS 1.2+)."""
    if not certfile:
        raise ListenerError("a TLS listener needs ssl.certfile (PEM certificate chain) and ssl.keyfile")
    mode = client_auth.strip().lower()
    if mode not in _CLIENT_AUTH:
        raise ListenerError(f"ssl.client.auth must be none, requested or required, not {client_auth!r}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile, keyfile or None, password or None)
        if cafile:
            context.load_verify_locations(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ListenerError(f"cannot load the TLS certificate, key or CA file: {exc}") from None
    if mode != "none" and not cafile:
        raise ListenerError("ssl.client.auth=requested|required needs ssl.cafile")
    context.verify_mode = _CLIENT_AUTH[mode]
    return context


def certificate_principal(peercert: object) -> str | None:
    """Kafka's default SSL principal: ``User:`` + the client certificate's subject DN (RFC 2253 order)."""
    if not isinstance(peercert, dict):
        return None
    subject = peercert.get("subject")
    if not subject:
        return None
    parts = [f"{key}={value}" for rdn in reversed(subject) for key, value in rdn]
    names = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
             "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST"}  # fmt: skip
    renamed = []
    for part in parts:
        key, _, value = part.partition("=")
        renamed.append(f"{names.get(key, key)}={value}")
    return "User:" + ",".join(renamed)


class BoundListener:
    """A listener once bound: what its connections need to know about it."""

    __slots__ = ("advertised", "listener", "ssl_context")

    def __init__(self, listener: Listener, ssl_context: ssl.SSLContext | None) -> None:
        self.listener = listener
        self.ssl_context = ssl_context
        self.advertised: tuple[str, int] = (
            listener.advertised_host,
            listener.advertised_port or listener.port,
        )

    @property
    def name(self) -> str:
        return self.listener.name

    @property
    def security_protocol(self) -> str:
        return self.listener.security_protocol
