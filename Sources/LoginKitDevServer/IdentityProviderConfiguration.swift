// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import LoginKitJOSE

/// A user of the dev identity provider.
public struct DevUser: Sendable, Hashable {
    /// The login name (`username` in the password grant, `id` in the JSON login).
    public var username: String
    /// The password.
    public var password: String
    /// The `sub` claim.
    public var subject: String
    /// The `nickname` claim.
    public var nickname: String?
    /// The `birthdate` claim (`YYYY-MM-DD`).
    public var birthdate: String?
    /// The `email` claim. Default `<username>@example.test`; `nil`: none.
    package var email: String?

    /// A user who logs in as `username` with `password` and whose tokens carry `sub` = `subject`;
    /// their email is `<username>@example.test`.
    public init(username: String, password: String, subject: String, nickname: String? = nil, birthdate: String? = nil) {
        self.username = username
        self.password = password
        self.subject = subject
        self.nickname = nickname
        self.birthdate = birthdate
        self.email = username + "@example.test"
    }
}

/// A client of the dev identity provider.
public struct DevClient: Sendable, Hashable {
    /// The `client_id`.
    public var id: String
    /// The secret, for confidential clients (`client_secret_basic` or `client_secret_post`).
    public var secret: String?
    /// The redirect URIs the authorization endpoint accepts; a loopback one (`http://127.0.0.1/…`,
    /// `http://[::1]/…`, `http://localhost/…`) matches any port (RFC 8252 §7.3).
    public var redirectURIs: [String]
    /// Public keys for `private_key_jwt` (RFC 7523): a client with keys is confidential and may
    /// authenticate with an assertion signed by one of them. More can be registered at run time
    /// (`POST /test/clients/<id>/jwks`).
    package var publicKeys: [JWK]
    /// `tls_client_auth` (RFC 8705 §2.1): the subject DN the client's TLS certificate must have,
    /// as an RFC 4514 string the way the provider writes a certificate's subject (`CN=client,O=Example`:
    /// the last RDN first, `,` between RDNs, short names CN, L, ST, O, OU, C, STREET, DC, UID).
    /// The client then authenticates with such a certificate only (no secret, no assertion); the
    /// certificate's chain is not checked (``IdentityProviderConfiguration/mtlsCertificateHeader``).
    /// `nil` (the default): not a `tls_client_auth` client.
    package var tlsClientAuthSubjectDN: String? = nil
    /// `self_signed_tls_client_auth` (RFC 8705 §2.2): the `x5t#S256` thumbprints of the
    /// certificates the client registered. The client then authenticates with one of them only.
    /// Empty (the default): not a `self_signed_tls_client_auth` client.
    package var selfSignedCertificateThumbprints: [String] = []
    /// Workload identities federated with the client: a client assertion issued by the trusted
    /// workload issuer (`<issuer>/workload`) for one of these subjects and audiences authenticates
    /// it, with the client named by `client_id` (Entra ID's and Google's "workload identity
    /// federation"). A client with federated credentials is confidential. Empty (the default): none.
    package var federatedCredentials: [DevFederatedCredential] = []

    /// A client `id`, confidential when it has a `secret`, allowed to redirect to `redirectURIs`.
    public init(id: String, secret: String? = nil, redirectURIs: [String] = []) {
        self.init(id: id, secret: secret, redirectURIs: redirectURIs, publicKeys: [])
    }

    /// A client `id` that authenticates with `private_key_jwt` signed by one of `publicKeys` (and
    /// with its `secret`, when it has one).
    package init(id: String, secret: String? = nil, redirectURIs: [String] = [], publicKeys: [JWK]) {
        self.id = id
        self.secret = secret
        self.redirectURIs = redirectURIs
        self.publicKeys = publicKeys
    }

    /// A client `id` that authenticates with a federated credential: a client assertion the
    /// workload issuer made for one of `federatedCredentials`.
    package init(id: String, redirectURIs: [String] = [], federatedCredentials: [DevFederatedCredential]) {
        self.init(id: id, secret: nil, redirectURIs: redirectURIs, publicKeys: [])
        self.federatedCredentials = federatedCredentials
    }

    /// `workload-client`: federated with the workload issuer's GitHub Actions subject
    /// (``DevServer/gitHubSubject``), metadata subject (``DevServer/metadataSubject``) and
    /// Kubernetes service account (``DevServer/kubernetesSubject``), each for the provider's own
    /// token endpoint or issuer as audience.
    package static let workloadClient = DevClient(
        id: "workload-client",
        federatedCredentials: [DevServer.gitHubSubject, DevServer.metadataSubject, DevServer.kubernetesSubject].map {
            DevFederatedCredential(subject: $0)
        })

    public static func == (a: DevClient, b: DevClient) -> Bool {
        a.id == b.id && a.secret == b.secret && a.redirectURIs == b.redirectURIs && a.publicKeys.map(\.json) == b.publicKeys.map(\.json)
            && a.tlsClientAuthSubjectDN == b.tlsClientAuthSubjectDN && a.selfSignedCertificateThumbprints == b.selfSignedCertificateThumbprints
            && a.federatedCredentials == b.federatedCredentials
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(secret)
        hasher.combine(redirectURIs)
        hasher.combine(publicKeys.map(\.json))
        hasher.combine(tlsClientAuthSubjectDN)
        hasher.combine(selfSignedCertificateThumbprints)
        hasher.combine(federatedCredentials)
    }

    /// The loopback redirect URIs a native app registers: `/callback` on `127.0.0.1`, `::1`, `localhost`.
    public static let loopbackRedirectURIs = ["http://127.0.0.1/callback", "http://[::1]/callback", "http://localhost/callback"]
}

/// A workload identity federated with a dev client: which issuer's tokens, for which subject and
/// audience, authenticate the client as a client assertion.
package struct DevFederatedCredential: Sendable, Hashable {
    /// Stands for this server's workload issuer, `<issuer>/workload`, whose port is known only once
    /// the server listens.
    package static let workloadIssuer = "urn:loginkit:dev:workload-issuer"

    /// The trusted issuer: ``workloadIssuer`` (the default) or that issuer's URL. Only the workload
    /// issuer's tokens can be verified: a credential naming another issuer authenticates nothing.
    package var issuer: String
    /// The `sub` the token must carry.
    package var subject: String
    /// The one `aud` the token must carry; `nil`: the provider's token endpoint or its issuer, as
    /// for any client assertion.
    package var audience: String?

    /// A credential for `subject` of `issuer` (this server's workload issuer by default), for `audience`.
    package init(issuer: String = DevFederatedCredential.workloadIssuer, subject: String, audience: String? = nil) {
        self.issuer = issuer
        self.subject = subject
        self.audience = audience
    }
}

/// How the dev identity provider behaves.
public struct IdentityProviderConfiguration: Sendable {
    /// Users; `demo`/`demo` by default.
    public var users: [DevUser] = [DevUser(username: "demo", password: "demo", subject: "248289761001", nickname: "Demo", birthdate: "1990-04-01")]
    /// Clients: the public `loginkit-cli` and the confidential `loginkit-service` (secret `dev-secret`),
    /// both with ``DevClient/loopbackRedirectURIs``, `loginkit-signed` (a secret long enough for
    /// `client_secret_jwt`), and `workload-client`, which authenticates with a workload identity token
    /// from the server's workload issuer.
    public var clients: [DevClient] = [
        DevClient(id: "loginkit-cli", redirectURIs: DevClient.loopbackRedirectURIs),
        DevClient(id: "loginkit-service", secret: "dev-secret", redirectURIs: DevClient.loopbackRedirectURIs),
        // Long enough a secret for client_secret_jwt (HS256 needs 32 bytes, RFC 7518 §3.2); it also
        // takes private_key_jwt once a key is registered for it.
        DevClient(id: "loginkit-signed", secret: "dev-secret-for-client-secret-jwt-0123456789"),
        DevClient.workloadClient,
    ]
    /// The resources and audiences tokens may be asked for (RFC 8707, RFC 8693); others get
    /// `invalid_target`. `nil` (the default) accepts every absolute URI without a fragment.
    package var resourceServers: [String]? = nil
    /// The scopes offered: discovery lists them in `scopes_supported`, and a request asking for
    /// another (password, client credentials, device or browser login) gets `invalid_scope`.
    /// `nil` (the default) lists `openid profile offline_access` and accepts every scope.
    package var supportedScopes: [String]? = nil
    /// Access-token lifetime. Default 3600 s.
    public var accessTokenLifetime: Duration = .seconds(3600)
    /// ID-token lifetime. Default 3600 s.
    public var idTokenLifetime: Duration = .seconds(3600)
    /// Refresh-token lifetime. Default 1 day.
    public var refreshTokenLifetime: Duration = .seconds(86_400)
    /// Whether each refresh issues a new refresh token and retires the old one. Default `true`.
    package var rotatesRefreshTokens = true
    /// Whether presenting a retired refresh token revokes its whole family (reuse detection).
    /// Default `true`.
    package var revokesFamilyOnReuse = true
    /// Device codes: lifetime and the minimum polling interval. Defaults 600 s and 5 s.
    package var deviceCodeLifetime: Duration = .seconds(600)
    /// The minimum polling interval for device codes. Default 5 s.
    package var deviceInterval: Duration = .seconds(5)
    /// The `verification_uri` device authorizations name (`verification_uri_complete` adds
    /// `?user_code=…`); `nil` for `<issuer>/device`. Tests put hostile text here.
    package var deviceVerificationURI: String?
    /// The time the provider issues and checks tokens by; inject a test clock's.
    package var now: @Sendable () -> Date = { Date() }
    /// Whether ID tokens carry the user's profile claims (`preferred_username`, `nickname`,
    /// `birthdate`, `email`). Default `true`; `false`: only `/userinfo` answers them, as providers
    /// that keep ID tokens small do.
    package var idTokenCarriesProfileClaims = true
    /// The `sub` `/userinfo` answers instead of the token's user's: a provider whose userinfo
    /// describes someone else than the ID token (OpenID Connect Core §5.3.4 says to ignore it then).
    /// Default `nil`: the user's own.
    package var userinfoSubjectOverride: String?
    /// Whether token requests may, must or cannot bind tokens to a DPoP key (RFC 9449). Default
    /// `.optional`.
    package var dpop: DevDPoPPolicy = .optional
    /// Whether the token and PAR endpoints require the server's DPoP nonce in proofs (RFC 9449 §8):
    /// a proof without the current one gets 400 `use_dpop_nonce` and a `DPoP-Nonce` header.
    /// Default `false`.
    package var dpopNonceAtTokenEndpoint = false
    /// Whether `/api/resource` requires the server's DPoP nonce in proofs (RFC 9449 §9): a proof
    /// without the current one gets 401 `DPoP error="use_dpop_nonce"` and a `DPoP-Nonce` header.
    /// Default `false`.
    package var dpopNonceAtResource = false
    /// Whether pushed authorization requests (RFC 9126) are offered, required or absent. Default
    /// `.offered`.
    package var par: DevPARPolicy = .offered
    /// The `acr` `/api/resource` requires: a token with another (or none) gets 401
    /// `insufficient_user_authentication` with `acr_values` (RFC 9470). Default `nil`: any.
    package var resourceRequiresACR: String?
    /// The oldest authentication, in seconds, `/api/resource` accepts: a token whose `auth_time`
    /// is older (or absent) gets 401 `insufficient_user_authentication` with `max_age` (RFC 9470).
    /// Default `nil`: any.
    package var resourceMaxAge: Int?
    /// The request header in which a TLS-terminating proxy in front of the provider passes on the
    /// client certificate it received, as URL-escaped PEM: nginx with `ssl_verify_client
    /// optional_no_ca` and `proxy_set_header X-Client-Cert $ssl_client_escaped_cert`, the usual
    /// deployment of mutual TLS (RFC 8705) before a plain-HTTP server. When set, the provider
    /// takes that header as the certificate the client presented on its TLS connection: clients
    /// registered with ``DevClient/tlsClientAuthSubjectDN`` or
    /// ``DevClient/selfSignedCertificateThumbprints`` authenticate with it, every access token
    /// issued to a request that carries one is a JWT bound to it (`cnf.x5t#S256`), `/api/resource`
    /// accepts such a token only with that certificate, and discovery lists `tls_client_auth`,
    /// `self_signed_tls_client_auth` and `tls_client_certificate_bound_access_tokens`. The header is
    /// trusted as it comes, and the chain is not verified (`optional_no_ca`): only the proxy may
    /// be able to reach the provider, whoever else can send the header presents any certificate.
    /// Default `nil`: no mutual TLS.
    package var mtlsCertificateHeader: String?
    /// The proxy's https origin (`https://127.0.0.1:8443`): with ``mtlsCertificateHeader``,
    /// discovery's `mtls_endpoint_aliases` name the token, revocation, device authorization and
    /// pushed authorization request endpoints there, and DPoP proofs of requests that came through
    /// it name it in `htu`. Default `nil`: no aliases.
    package var mtlsBaseURL: String?

    /// The default provider: user `demo`/`demo`, clients `loginkit-cli` and `loginkit-service`,
    /// one-hour tokens, rotating refresh tokens with reuse detection, the real time.
    public init() {}
}

/// How the dev identity provider's token endpoint treats DPoP proofs (RFC 9449).
package enum DevDPoPPolicy: Sendable {
    /// A token request with a valid `DPoP` header gets DPoP-bound tokens; one without gets Bearer tokens.
    case optional
    /// A token request without a `DPoP` header is refused (400 `invalid_dpop_proof`).
    case required
    /// The `DPoP` header is ignored and every token is a Bearer token; discovery lists no DPoP algorithms.
    case disabled
}

/// Whether the dev identity provider takes pushed authorization requests (RFC 9126).
package enum DevPARPolicy: Sendable {
    /// `POST /oauth/par` is advertised and optional.
    case offered
    /// `POST /oauth/par` is advertised and the authorization endpoint refuses requests without `request_uri`.
    case required
    /// No PAR endpoint: discovery names none and `/oauth/par` answers 404.
    case absent
}

extension Duration {
    var wholeSeconds: Int { Int(components.seconds) }
}
#endif
