"""Verify http_signature requests with PyPI's http-message-signatures.

Reads a JSON list of {"alg", "method", "url", "headers": [[name, value]...],
"body": base64, "keyid"} from the file named by argv[1] and prints one line per
request: "ok" or "fail: reason". Used by TestHTTPSignatureVerifiedByPython
(optional: it runs when HTTPSIG_PYTHON names a Python with the library).
"""

import base64
import datetime
import json
import sys

import requests
from http_message_signatures import HTTPMessageVerifier, MappingKeyResolver, algorithms

ED25519_PUB = open(sys.argv[2], "rb").read()
HMAC_KEY = base64.b64decode(open(sys.argv[3]).read().strip())


def main():
    for case in json.load(open(sys.argv[1])):
        alg = {"ed25519": algorithms.ED25519, "hmac-sha256": algorithms.HMAC_SHA256}[case["alg"]]
        key = ED25519_PUB if case["alg"] == "ed25519" else HMAC_KEY
        body = base64.b64decode(case["body"])
        headers = {}
        for name, value in case["headers"]:
            # A server's HTTP parser strips each field line's white space
            # (RFC 9110 5.5); requests takes one value per name.
            value = value.strip(" \t")
            headers[name] = value if name not in headers else headers[name] + ", " + value
        req = requests.Request(case["method"], case["url"], headers=headers, data=body or None).prepare()
        verifier = HTTPMessageVerifier(
            signature_algorithm=alg, key_resolver=MappingKeyResolver(public_keys={case["keyid"]: key}, private_keys={})
        )
        try:
            verifier.verify(req, max_age=datetime.timedelta(minutes=5), body=body)
            print("ok")
        except Exception as e:  # noqa: BLE001
            print(f"fail: {type(e).__name__}: {e}")


main()
