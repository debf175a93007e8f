"""AWS Signature Version 4, as Cairn's HTTP port checks it (service s3).

Only the standard library: hmac and hashlib. The payload is always signed
(x-amz-content-sha256 is the body's SHA-256): the JSON endpoints refuse
UNSIGNED-PAYLOAD.
"""

import datetime
import hashlib
import hmac
from urllib.parse import quote

SERVICE = "s3"


def _hmac(key, msg):
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def uri_encode(s, keep_slash):
    """Encodes s as SigV4 wants it: every byte but A-Z a-z 0-9 - _ . ~
    (and / in a path) as %XX."""
    return quote(s, safe="-_.~/" if keep_slash else "-_.~")


def canonical_query(params):
    """The canonical query string of a list of (name, value) pairs."""
    pairs = sorted((uri_encode(k, False), uri_encode(v, False)) for k, v in params)
    return "&".join(f"{k}={v}" for k, v in pairs)


def sign(method, host, path, params, headers, body, access_key, secret_key, region, now=None):
    """Returns headers with the signature's headers added (Authorization,
    x-amz-date, x-amz-content-sha256, host). path is already URI-encoded
    as it goes on the wire; params are the query's (name, value) pairs."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    payload_hash = hashlib.sha256(body or b"").hexdigest()
    out = dict(headers)
    out["host"] = host
    out["x-amz-date"] = amz_date
    out["x-amz-content-sha256"] = payload_hash
    signed = sorted(k.lower() for k in out)
    lower = {k.lower(): " ".join(str(v).strip().split()) for k, v in out.items()}
    canonical_headers = "".join(f"{k}:{lower[k]}\n" for k in signed)
    signed_headers = ";".join(signed)
    canonical = "\n".join([method, path, canonical_query(params), canonical_headers, signed_headers, payload_hash])
    scope = f"{day}/{region}/{SERVICE}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), day)
    key = _hmac(key, region)
    key = _hmac(key, SERVICE)
    key = _hmac(key, "aws4_request")
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                            f"SignedHeaders={signed_headers}, Signature={signature}")
    return out
