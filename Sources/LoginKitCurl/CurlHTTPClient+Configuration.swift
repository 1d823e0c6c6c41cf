extension CurlHTTPClient {
    /// Limits and TLS settings for a `CurlHTTPClient`. The defaults are the safe ones.
    public struct Configuration: Sendable {
        /// How long connecting (TCP and TLS) may take. Default 10 s.
        public var connectTimeout: Duration = .seconds(10)
        /// How long a whole request may take, from queueing to the last body byte. Default 30 s.
        /// Time the process spends stopped (a signal, a frozen cgroup, a paused container) counts,
        /// but an answer that arrived meanwhile is read before the timeout is declared.
        public var totalTimeout: Duration = .seconds(30)
        /// The largest response body accepted; a larger one aborts the transfer with
        /// `NetworkError.Code.responseTooLarge`, nothing past the cap kept. Default 4 MiB.
        public var maximumResponseSize: Int = 4 * 1024 * 1024
        /// Whether plain `http://` may go to hosts that are not loopback. Default `false`:
        /// `http://` only to `127.0.0.0/8`, `::1` and `localhost` — and, for an identity source's
        /// request alone, to a link-local address written as such (`169.254.0.0/16`, `fe80::/10`),
        /// where cloud metadata services answer.
        public var allowsInsecureHTTP: Bool = false
        /// The most connections kept open to one host; transfers beyond it wait for a free one.
        /// Default 64.
        public var maximumConnectionsPerHost: Int = 64
        /// TLS settings: trust, pinning, a client certificate. Peer and host verification are always on.
        public var tls: TLS = TLS()
        /// Sent as `User-Agent` unless the request sets its own.
        public var userAgent: String = "LoginKit/0.1"
        /// The proxy for destinations that are not loopback, a URL as libcurl takes it
        /// (`http://proxy.example:3128`), without user info. `nil` (the default) leaves the choice to
        /// libcurl, which reads `https_proxy`, `http_proxy` and `all_proxy` from the environment;
        /// `""` uses no proxy at all. Either way `NO_PROXY`/`no_proxy` is honoured, and loopback
        /// destinations (`127.0.0.0/8`, `::1`, `localhost`) never go through a proxy, whatever this
        /// or the environment says: a plain-`http://` request to them would cross the network in clear.
        public var proxy: String?
        /// How long one `curl_multi_poll` of the driver thread may sleep when nothing happens
        /// (libcurl shortens it to its own next timeout; a wake-up ends it at once). Tests raise it
        /// so that a lost wake-up hangs instead of costing a second.
        var idlePollMilliseconds: Int32 = 1000
        /// What transfer deadlines are measured on: `CLOCK_MONOTONIC` in nanoseconds. Tests set a
        /// clock of their own, to pass a deadline without waiting for it.
        package var monotonicClock: @Sendable () -> UInt64 = monotonicNanoseconds

        /// The default configuration.
        public init() {}
    }

    /// TLS settings: where trusted CAs come from, an optional pinned public key, and an optional
    /// client certificate. There is deliberately no switch that turns verification off.
    public struct TLS: Sendable {
        /// A PEM file of CA certificates to trust instead of the system's.
        public var caFile: String?
        /// A directory of hashed CA certificates (`c_rehash` layout) to trust.
        public var caDirectory: String?
        /// A pinned public key: a PEM/DER file path, or `sha256//<base64>` hashes separated by `;`.
        /// When set, the server's key must match in addition to the chain verifying.
        public var pinnedPublicKey: String?
        /// The certificate this client presents when a server asks for one (mutual TLS, as
        /// RFC 8705 uses it): the path of a PEM file holding the certificate, optionally followed
        /// by the intermediate CA certificates that lead to the one the server trusts; a regular
        /// file (not a symbolic link) of at most 1 MiB. Set it together with ``clientKey``.
        /// `CurlHTTPClient.init` reads both files once, and every connection of the client presents
        /// what it read then: a file changed or replaced afterwards takes effect in a new client.
        public var clientCertificate: String?
        /// The path of ``clientCertificate``'s private key: an unencrypted PEM file, a regular file
        /// (not a symbolic link) of the user's own that group and others cannot access (mode
        /// `0600` or stricter), in a directory that group and others cannot write.
        /// `CurlHTTPClient.init` refuses the configuration otherwise, with a `NetworkError` naming
        /// the file or its directory; the key's bytes never appear in an error. The client keeps
        /// the bytes it read in memory it overwrites with zeros when the client is released.
        public var clientKey: String?

        /// System trust store, no pin, no client certificate.
        public init(caFile: String? = nil, caDirectory: String? = nil, pinnedPublicKey: String? = nil) {
            self.caFile = caFile
            self.caDirectory = caDirectory
            self.pinnedPublicKey = pinnedPublicKey
        }
    }
}

extension Duration {
    /// Whole milliseconds, at least 1, saturating at `Int.max`.
    var clampedMilliseconds: Int {
        let (seconds, attoseconds) = components
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow || seconds < 0 { return seconds < 0 ? 1 : Int(Int64.max) }
        return Swift.max(1, Int(ms + attoseconds / 1_000_000_000_000_000))
    }
}
