"""An MCP server over streamable HTTP with TLS (the official Python SDK's MCPServer under
uvicorn), its certificate signed by a CA made for the occasion.

    tls_server.py DIR

Writes DIR/ca.pem (the CA a client must trust: SSL_CERT_FILE=DIR/ca.pem) and the
server's key and certificate (for 127.0.0.1 and localhost), listens on a free loopback
port and prints it once it is about to serve. The tool `hello` answers "hello over TLS".
Used by crates/claij/tests/mcp.rs.
"""

import datetime
import ipaddress
import socket
import sys
from pathlib import Path

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mcp.server.mcpserver import MCPServer


def pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def certificates(folder: Path) -> tuple[Path, Path]:
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "claij test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (folder / "ca.pem").write_bytes(pem(ca))
    key_file, cert_file = folder / "server.key", folder / "server.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_file.write_bytes(pem(cert))
    return key_file, cert_file


server = MCPServer("tls")


@server.tool()
def hello() -> str:
    """Says hello."""
    return "hello over TLS"


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    key_file, cert_file = certificates(folder)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    print(port, flush=True)
    uvicorn.run(
        server.streamable_http_app(),
        host="127.0.0.1",
        port=port,
        ssl_keyfile=str(key_file),
        ssl_certfile=str(cert_file),
        log_level="warning",
    )
