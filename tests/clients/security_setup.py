"""What a secured kaas needs, for test_security.py and bench/security_bench.py:
a test CA and a server certificate (openssl CLI), SCRAM users (`kaas user
set`), and the client settings for SASL_SSL / SASL_PLAINTEXT.

The server certificate has the SANs DNS:localhost and IP:127.0.0.1 and is
signed by a separate CA (webpki refuses a CA certificate used as a leaf);
clients verify it against the CA, hostname checks on.
"""

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certs:
    ca: Path
    cert: Path
    key: Path


def _run(cmd: list[str], cwd: Path) -> None:
    p = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")


def make_certs(directory: Path, days: int = 2) -> Certs:
    """A CA (ca.pem) and a server certificate (server.pem, key server.key,
    PKCS#8 EC P-256) for localhost / 127.0.0.1, in `directory`."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the openssl CLI is not on PATH (apt-get install openssl)")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _run([openssl, "req", "-x509", *ec, "-days", str(days), "-keyout", "ca.key", "-out", "ca.pem",
          "-subj", "/CN=kaas-test-ca",
          "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign"], d)
    _run([openssl, "req", *ec, "-keyout", "server.key", "-out", "server.csr",
          "-subj", "/CN=localhost"], d)
    (d / "server.ext").write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    _run([openssl, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
          "-CAcreateserial", "-days", str(days), "-out", "server.pem",
          "-extfile", "server.ext"], d)
    return Certs(ca=d / "ca.pem", cert=d / "server.pem", key=d / "server.key")


def set_user(kaas_bin: Path, data_dir: Path, name: str, password: str,
             mechanism: str = "SCRAM-SHA-512") -> None:
    """`kaas user set` (before the broker's first start)."""
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    _run([str(kaas_bin), "user", "set", "--data-dir", str(data_dir), "--mechanism", mechanism,
          "--name", name, "--password", password], Path(data_dir).parent)


def librdkafka_config(bootstrap: str, protocol: str, mechanism: str, user: str, password: str,
                      ca: Path | None) -> dict:
    """confluent-kafka settings for SASL_SSL or SASL_PLAINTEXT."""
    conf = {"bootstrap.servers": bootstrap, "security.protocol": protocol,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    if protocol.endswith("SSL"):
        conf["ssl.ca.location"] = str(ca)
    return conf


def kafka_python_config(bootstrap: str, protocol: str, mechanism: str, user: str, password: str,
                        ca: Path | None) -> dict:
    """kafka-python keyword arguments for SASL_SSL or SASL_PLAINTEXT."""
    conf = {"bootstrap_servers": bootstrap, "security_protocol": protocol,
            "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}
    if protocol.endswith("SSL"):
        conf["ssl_cafile"] = str(ca)
    return conf
