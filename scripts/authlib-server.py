"""A standards-following OAuth 2.0 authorization server that LoginKit has no code for, built from
Authlib's server components (the library behind oidc-provider-mock, in .venv-oidc): discovery
(RFC 8414), the client credentials grant, client authentication by client_secret_basic,
client_secret_post, private_key_jwt and client_secret_jwt (RFC 7523, Authlib's own checks of
aud, exp, iss = sub and jti reuse), RFC 9068 JWT access tokens whose aud names the requested
resources (RFC 8707), and RFC 8693 token exchange for its own access tokens.

    python authlib-server.py CLIENTS.json

CLIENTS.json: [{"client_id": …, "client_secret": … (optional), "jwks": {"keys": [...]}
(optional)}]. Listens on 127.0.0.1 and a free port, prints `issuer: http://127.0.0.1:PORT` on
stdout once it listens, and runs until it is killed, or its parent process ends (PR_SET_PDEATHSIG).
Used by Tests/IntegrationTests/ThirdPartyServerSideTests.swift.
"""

import ctypes
import json
import signal
import sys
import time

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc6749.errors import InvalidGrantError, InvalidRequestError, OAuth2Error
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from flask import Flask, jsonify, request
from joserfc.jwk import KeySet, OctKey
from werkzeug.serving import make_server

AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt", "client_secret_jwt"]
# Authlib's one server-side method for both assertion kinds; the key it resolves decides which.
ASSERTION = JWTBearerClientAssertion.CLIENT_AUTH_METHOD


class InvalidTargetError(OAuth2Error):
    error = "invalid_target"


class Client(ClientMixin):
    def __init__(self, entry):
        self.client_id = entry["client_id"]
        self.client_secret = entry.get("client_secret")
        self.jwks = entry.get("jwks")

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return scope or ""

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return self.client_secret is not None and client_secret == self.client_secret

    def check_endpoint_auth_method(self, method, endpoint):
        if method == ASSERTION:
            return self.jwks is not None or self.client_secret is not None
        return method in AUTH_METHODS and self.client_secret is not None

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return True


def main():
    clients = {entry["client_id"]: Client(entry) for entry in json.load(open(sys.argv[1]))}
    signing_keys = KeySet.generate_key_set("RSA", 2048, {"use": "sig", "alg": "RS256"}, count=1)
    issued = {}  # access token → (expiry, subject, scope)
    seen_jti = set()
    app = Flask(__name__)
    http = make_server("127.0.0.1", 0, app, threaded=True)  # routes are looked up per request
    base = f"http://127.0.0.1:{http.server_port}"

    def issuer():
        return base

    def resources():
        targets = request.form.getlist("resource")
        for target in targets:
            if ":" not in target or "#" in target or target.startswith(":"):
                raise InvalidTargetError(description="resource must be an absolute URI without a fragment")
        if request.form.get("audience"):
            targets.append(request.form["audience"])
        return targets

    class Tokens(JWTBearerTokenGenerator):
        def get_jwks(self):
            return signing_keys

        def get_audiences(self, client, user, scope):
            return resources() or client.get_client_id()

    class Assertions(JWTBearerClientAssertion):
        """Authlib's checks of client assertions (RFC 7523 §3): aud, exp, iss = sub, jti reuse."""

        def get_audiences(self):
            return [issuer() + "/token", issuer()]

        def validate_jti(self, claims, jti):
            key = (claims["sub"], jti)
            if key in seen_jti:
                return False
            seen_jti.add(key)
            return True

        def resolve_client_public_key(self, client):
            # private_key_jwt with the registered keys; client_secret_jwt with the secret.
            return KeySet.import_key_set(client.jwks) if client.jwks else OctKey.import_key(client.client_secret)

    class ClientCredentials(grants.ClientCredentialsGrant):
        TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", ASSERTION]

    class TokenExchange(grants.BaseGrant, grants.TokenEndpointMixin):
        GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
        TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", ASSERTION]

        def validate_token_request(self):
            client = self.authenticate_token_endpoint_client()
            self.request.client = client
            form = self.request.form
            if not form.get("subject_token") or not form.get("subject_token_type"):
                raise InvalidRequestError(description="subject_token and subject_token_type are required")
            if form["subject_token_type"] != "urn:ietf:params:oauth:token-type:access_token":
                raise InvalidRequestError(description="unsupported subject_token_type")
            record = issued.get(form["subject_token"])
            if record is None or record[0] <= time.time():
                raise InvalidGrantError(description="the subject token is not valid")
            resources()

        def create_token_response(self):
            client = self.request.client
            token = self.generate_token(scope=self.request.form.get("scope", ""), include_refresh_token=False, user=None)
            token["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
            self.save_token(token)
            return 200, token, self.TOKEN_RESPONSE_HEADER

    def save_token(token, request):
        issued[token["access_token"]] = (time.time() + token.get("expires_in", 3600), request.client.get_client_id(), token.get("scope"))

    authorization = AuthorizationServer(app, query_client=clients.get, save_token=save_token)
    authorization.register_client_auth_method(ASSERTION, Assertions())
    authorization.register_grant(ClientCredentials)
    authorization.register_grant(TokenExchange)
    authorization.register_token_generator("default", Tokens(issuer=base))

    @app.get("/.well-known/openid-configuration")
    def discovery():
        return jsonify({
            "issuer": issuer(),
            "token_endpoint": issuer() + "/token",
            "jwks_uri": issuer() + "/jwks",
            "grant_types_supported": ["client_credentials", TokenExchange.GRANT_TYPE],
            "token_endpoint_auth_methods_supported": AUTH_METHODS,
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "PS256", "ES256", "HS256"],
        })

    @app.get("/jwks")
    def jwks():
        return jsonify(signing_keys.as_dict(private=False))

    @app.post("/token")
    def token():
        return authorization.create_token_response()

    # Ends with the test process that started it, however that one ends.
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    print(f"issuer: {base}", flush=True)
    http.serve_forever()


if __name__ == "__main__":
    main()
