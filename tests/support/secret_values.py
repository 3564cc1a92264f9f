"""The secrets of the audit (tests/real/test_secrets_audit.py), each distinctive so that a leak of it, in
any form, cannot be mistaken for anything else; the profiles and pod template that carry them; and the
small servers the audit needs (a pod template over HTTP, a port nobody listens on).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import socket
import textwrap
import threading
from typing import Any

from tests.support.secret_search import Secret

BRIDGE_TOKEN = "brdg+Tk/7qZ$w9=Lx3@Vn5eR8yU2hJ"
SECURITY_TOKEN = "secTok.4Hf8Jq2Wm6Zp0Ys3Xc7Bv1Nd"
WRONG_BRIDGE_TOKEN = "wrongBr+Tk/2Lp$8Qw=Zx4@Mn6Vb"  # a stale token a misconfigured bridge sends
ENV_SECRET = "envS3cret+Pw/9Kd$Qz=Ma7@Lr2Tx"
TEMPLATE_SECRET = "tplS3cret+Hn/4Vb$Wx=Ke8@Gt5Py"
REMOTE_QUERY_SECRET = "rqS3cretAccessTok9Vm2Lx7Qp4"
REMOTE_USER_SECRET = "ruS3cretPassw0rd5Ns8Kd1Zt6"
UNREACHABLE_TOKEN = "unrTok.8Gd3Ks7Lq1Xm5Vb9Nc2Rz"
URL_USER_SECRET = "urlS3cretAdminPw4Hj7Tm2Wq9"
INVALID_ENV_SECRET = "badEnvS3cret+Lv/6Rn$Yc=Pq3Jw"
TAG_SECRET = "!tagS3cret9Xw2Lm5Qv8Rt"  # a password that starts with "!" written unquoted in YAML
ALIAS_SECRET = "*alS3cret4Kp7Nz1Wd6Hy"  # one that starts with "*"
INCIDENT_SECRET = "incS3cret+Fh/2Dm$Xv=Tb8Gk"
# Multi-line key material, as a resolved {{SECRET:...}} holding a private key would arrive.
KEY_LINES = (
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz",
    "c2gtZWQyNTUxOQAAACDx9Qm2Zr7Vt0KpLw3Ua8Hc5Nd1Ye4Xf6Ig2Jb9Mk0OsQAA",
    "AIhVq3nZt5Lw8Kd2Xm7Ry4Pb1Hc9Jf6Gs3Te0Ua5Nk8Wo2Qi7Ey4Vx1Zr6Mt9Lp3",
)
PRIVATE_KEY = "\n".join(
    ["-----BEGIN OPENSSH PRIVATE KEY-----", *KEY_LINES, "-----END OPENSSH PRIVATE KEY-----"]
)


def _ca_body() -> list[str]:
    """A certificate-shaped PEM body, distinct per line (the profile's parser checks base64 only, and
    the fake API server speaks plain HTTP, so it is never used for TLS)."""
    raw = b"".join(hashlib.sha512(f"audit-ca-{i}".encode()).digest() for i in range(8))
    text = base64.b64encode(raw).decode()
    return textwrap.wrap(text, 64)


CA_LINES = _ca_body()
CA_PEM = "\n".join(["-----BEGIN CERTIFICATE-----", *CA_LINES, "-----END CERTIFICATE-----"]) + "\n"

FIXED_SECRETS = (
    Secret("bridge token", BRIDGE_TOKEN),
    Secret("wrong bridge token", WRONG_BRIDGE_TOKEN),
    Secret("security token", SECURITY_TOKEN),
    Secret("security token of the unreachable cluster", UNREACHABLE_TOKEN),
    Secret("password in the unreachable cluster URL", URL_USER_SECRET),
    Secret("resolved secret in Environment", ENV_SECRET),
    Secret("resolved secret in a pod template", TEMPLATE_SECRET),
    Secret("access token in a RemoteFile URL", REMOTE_QUERY_SECRET),
    Secret("password in a RemoteFile URL", REMOTE_USER_SECRET),
    Secret("resolved secret in an invalid Environment", INVALID_ENV_SECRET),
    Secret("resolved secret read as a YAML tag", TAG_SECRET[1:]),
    Secret("resolved secret read as a YAML alias", ALIAS_SECRET[1:]),
    Secret("resolved secret of a profile that hits a bug", INCIDENT_SECRET),
    *(Secret(f"private key line {i + 1}", line) for i, line in enumerate(KEY_LINES)),
    *(Secret(f"CA certificate line {i + 1}", line) for i, line in enumerate(CA_LINES[1:])),
)

PROPERTIES_TEMPLATE = "gocd/gocd-agent-alpine-3.19:v24.1.0"
POD_TEMPLATE = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: audit-{{{{ POD_POSTFIX }}}}
spec:
  containers:
  - name: agent-{{{{ CONTAINER_POSTFIX }}}}
    image: {PROPERTIES_TEMPLATE}
    env:
    - name: DEPLOY_TOKEN
      value: '{TEMPLATE_SECRET}'
    - name: SSH_KEY
      value: |
{textwrap.indent(PRIVATE_KEY, " " * 8)}
"""


def template_with(value_line: str) -> str:
    """A pod template whose env value is written unquoted, as `value: {{SECRET:[vault][x]}}`."""
    return POD_TEMPLATE.replace(f"value: '{TEMPLATE_SECRET}'", f"value: {value_line}")


class TemplateServer:
    """Serves the pod template over HTTP for RemoteFile profiles, whatever the path and query."""

    def __init__(self) -> None:
        template = POD_TEMPLATE.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(template)))
                self.end_headers()
                self.wfile.write(template)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a test fixture's access log is nobody's to read

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
