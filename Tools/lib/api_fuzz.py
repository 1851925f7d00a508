"""Signed requests for schemathesis against a horizon-server (Tools/api-fuzz.sh).

Two uses:
  python api_fuzz.py setup URL STATE SERVER_BIN DATA_DIR EMAIL PASSWORD
      activates a new terminal key for the merchant, registers a new wallet key (both codes read
      from the server's outbox), signs the merchant's admin in, and writes the keys and the
      session token to STATE (JSON, 0600).
  SCHEMATHESIS_HOOKS=api_fuzz (with HORIZON_FUZZ_STATE=STATE)
      an auth provider: every operation the contract marks HorizonSignature is signed with the
      terminal's or the wallet's key (ECDSA P-256/SHA-256 over the scheme's lines, over the exact
      bytes sent), and every MerchantAdminSession operation carries the admin's bearer token.
      A schema-valid request also keeps the rules JSON Schema cannot state (a fresh key's proof,
      `from` not after `to`, a real test card, limits in UTF-8 bytes), so the server's refusal of
      one is a failure; Tools/lib/api-fuzz.toml lists the checks turned off, and why.
"""

import base64
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def _raw_signature(key, data: bytes) -> bytes:
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def _x963(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def authorization(key, method: str, path: str, body: bytes) -> str:
    """The HorizonSignature header for this request (Sources/HorizonAPI/RequestSignature.swift)."""
    now = str(int(time.time()))
    nonce = secrets.token_hex(16)
    lines = ["horizon/request/v1", method.upper(), path, now, nonce, hashlib.sha256(body).hexdigest()]
    signature = _raw_signature(key, "\n".join(lines).encode())
    return (
        f'HorizonSignature key="{_b64url(_x963(key))}", time="{now}", nonce="{nonce}", '
        f'signature="{_b64url(signature)}"'
    )


def _post(url: str, path: str, payload: dict, headers: dict | None = None) -> dict:
    request = urllib.request.Request(
        url + path, data=json.dumps(payload).encode(), method="POST",
        headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        raise SystemExit(f"POST {path}: {error.code} {error.read().decode(errors='replace')}")


def _outbox_code(server_bin: str, data_dir: str, to: str) -> str:
    out = subprocess.run(
        [server_bin, "outbox", "--to", to, "--limit", "1", "--data-dir", data_dir],
        check=True, capture_output=True, text=True).stdout
    match = re.search(r"code is (\d{8})", out)
    if not match:
        raise SystemExit(f"no code for {to} in the server's outbox:\n{out}")
    return match.group(1)


def setup(url, state_path, server_bin, data_dir, email, password):
    terminal = ec.generate_private_key(ec.SECP256R1())
    public = base64.b64encode(_x963(terminal)).decode()
    label = "Fuzz till"
    proof = _raw_signature(terminal, "\n".join(["horizon/activate/v1", email, label, public]).encode())
    _post(url, "/v1/terminals/activate", {
        "email": email, "password": password, "label": label, "publicKey": public,
        "proof": base64.b64encode(proof).decode()})

    wallet = ec.generate_private_key(ec.SECP256R1())
    public = base64.b64encode(_x963(wallet)).decode()
    wallet_email, phone = "fuzz-wallet@example.com", "+4915112345678"
    proof = _raw_signature(wallet, "\n".join(["horizon/register-wallet/v1", wallet_email, phone, public]).encode())
    started = _post(url, "/v1/wallets/registrations", {
        "name": "Fuzz", "email": wallet_email, "phone": phone, "publicKey": public,
        "proof": base64.b64encode(proof).decode()})
    _post(url, f"/v1/wallets/registrations/{started['registrationId']}/verify", {
        "smsCode": _outbox_code(server_bin, data_dir, phone),
        "emailCode": _outbox_code(server_bin, data_dir, wallet_email)})

    session = _post(url, "/v1/merchant/sessions", {"email": email, "password": password})

    def pem(key):
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()

    fd = os.open(state_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump({"terminal": pem(terminal), "wallet": pem(wallet), "adminToken": session["token"],
                   "walletEmail": wallet_email}, file)


# The hooks: loaded by schemathesis (SCHEMATHESIS_HOOKS=api_fuzz).
if __name__ != "__main__":
    import requests
    import schemathesis

    _state = json.load(open(os.environ["HORIZON_FUZZ_STATE"]))
    _keys = {name: serialization.load_pem_private_key(_state[name].encode(), None) for name in ("terminal", "wallet")}
    _PENDING = "HorizonSignature-pending "

    def _signer(case) -> str | None:
        """Whose key signs this operation: the terminal's for what terminals call, the wallet's
        for the wallet's own operations."""
        path = case.operation.path
        if path.startswith("/v1/wallet/") or path == "/v1/status-messages":
            return "wallet"
        return "terminal"

    def _schemes(case) -> list[str]:
        definition = case.operation.definition.raw
        security = definition.get("security", case.operation.schema.raw_schema.get("security", []))
        return [name for requirement in security for name in requirement]

    @schemathesis.auth()
    class HorizonAuth:
        def get(self, case, context):
            return _state["adminToken"]

        def set(self, case, data, context):
            schemes = _schemes(case)
            case.headers = case.headers or {}
            if "HorizonSignature" in schemes:
                # Signed in `send` below, over the exact bytes that go out.
                case.headers["Authorization"] = _PENDING + _signer(case)
            elif "MerchantAdminSession" in schemes:
                case.headers["Authorization"] = f"Bearer {data}"

    @schemathesis.serializer("message/ohttp-req")
    def _sealed_request(ctx, value):
        # A sealed request is opaque bytes to everyone but the gateway: sent as generated.
        from schemathesis.transport.requests import serialize_binary

        return {"data": serialize_binary(value)}

    @schemathesis.hook
    def filter_query(ctx, query):
        # A cursor is a value the server made and authenticated: a generated one is refused
        # (400 invalid_cursor) by design, so only requests without one are generated.
        return not (query and "cursor" in query)

    # Which fields a proof covers, by operation: the proof is the new key's signature over these
    # lines, so a generated body gets a fresh key and its proof over what was generated.
    _PROOFS = {
        "/v1/terminals/activate": ("horizon/activate/v1", ("email", "label")),
        "/v1/wallets/registrations": ("horizon/register-wallet/v1", ("email", "phone")),
        "/v1/wallets/restorations": ("horizon/restore-wallet/v1", ("email",)),
    }

    def _with_proof(path, body):
        rule = _PROOFS.get(path)
        if rule is None or not isinstance(body, dict) or not all(isinstance(body.get(f), str) for f in rule[1]):
            return body
        # A case whose key or proof was made invalid on purpose (another type) stays invalid.
        if not isinstance(body.get("publicKey"), str) or not isinstance(body.get("proof"), str):
            return body
        key = ec.generate_private_key(ec.SECP256R1())
        public = base64.b64encode(_x963(key)).decode()
        lines = [rule[0], *(body[field] for field in rule[1]), public]
        return {**body, "publicKey": public,
                "proof": base64.b64encode(_raw_signature(key, "\n".join(lines).encode())).decode()}

    @schemathesis.hook
    def map_body(ctx, body):
        return _with_proof(getattr(getattr(ctx, "operation", None), "path", ""), body)

    def _with_valid_card(body):
        """A card the server can add: JSON Schema cannot say a number's brand range, its Luhn
        check digit, an expiry after today or the brand's CVC length, so a schema-valid card is
        refused (400 card_*) by design. The generated cardholder and name are kept."""
        if not isinstance(body, dict):
            return body
        return {**body, "cardNumber": "4242 4242 4242 4242", "expiry": f"12/{time.gmtime().tm_year + 2}",
                "cvc": "123"}

    def _with_ordered_range(query):
        """`from` after `to` is refused (400), a rule between two parameters JSON Schema cannot
        state: a schema-valid range is sent in order."""
        if not isinstance(query, dict):
            return query
        def number(value):
            try:
                return int(value)
            except (TypeError, ValueError):
                return None

        low, high = number(query.get("from")), number(query.get("to"))
        if low is not None and high is not None and low > high:
            return {**query, "from": query["to"], "to": query["from"]}
        return query

    def _resolved(root, node):
        """`node` with its local `$ref`s followed."""
        while isinstance(node, dict) and "$ref" in node:
            target = root
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def _within_byte_limits(case):
        """A free-text field's maxLength is in bytes of UTF-8 too (openapi.yaml's introduction);
        JSON Schema counts characters, so a schema-valid name of 64 "é" is over. Such a field is
        cut to its limit in bytes when what is left still matches the field's pattern."""
        if not isinstance(case.body, dict):
            return case.body
        root = case.operation.schema.raw_schema
        content = case.operation.definition.raw.get("requestBody", {}).get("content", {})
        body_schema = _resolved(root, content.get("application/json", {}).get("schema"))
        properties = (body_schema or {}).get("properties", {})
        body = dict(case.body)
        for name, value in case.body.items():
            field = _resolved(root, properties.get(name))
            limit = (field or {}).get("maxLength")
            if not isinstance(value, str) or limit is None or len(value.encode()) <= limit:
                continue
            cut = value.encode()[:limit].decode(errors="ignore")
            if re.search(field.get("pattern", ""), cut) and len(cut) >= field.get("minLength", 0):
                body[name] = cut
        return body

    @schemathesis.hook
    def before_call(ctx, case, kwargs):
        # Every phase (the coverage phase bypasses the generation hooks): a schema-valid case
        # gets a real key and proof, a real card, an ordered range and no made-up cursor;
        # invalid cases are sent as generated.
        meta = case.meta
        if meta is None or not meta.generation.mode.is_positive:
            return
        path, method = case.operation.path, case.operation.method.upper()
        case.body = _with_proof(path, _within_byte_limits(case))
        if path == "/v1/wallet/cards" and method == "POST":
            case.body = _with_valid_card(case.body)
        # An invitation code is a secret the operator issued: a generated one is never known and
        # is refused (422 invitation_unknown) as the contract says. Codes are optional on this
        # server, so a valid case registers without one.
        if path == "/v1/wallets/registrations" and isinstance(case.body, dict):
            case.body = {name: value for name, value in case.body.items() if name != "invitationCode"}
        if path == "/v1/merchant/transactions":
            case.query = _with_ordered_range(case.query)
        if isinstance(case.query, dict) and "cursor" in case.query:
            case.query = {name: value for name, value in case.query.items() if name != "cursor"}

    _send = requests.Session.send

    def _signing_send(self, prepared, **kwargs):
        value = prepared.headers.get("Authorization", "")
        if value.startswith(_PENDING):
            body = prepared.body or b""
            if isinstance(body, str):
                body = body.encode()
            prepared.headers["Authorization"] = authorization(
                _keys[value[len(_PENDING):]], prepared.method, prepared.path_url, body)
        return _send(self, prepared, **kwargs)

    requests.Session.send = _signing_send


if __name__ == "__main__":
    if len(sys.argv) != 8 or sys.argv[1] != "setup":
        raise SystemExit(__doc__)
    setup(*sys.argv[2:])
