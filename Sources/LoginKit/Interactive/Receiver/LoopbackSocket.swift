import LoginKitHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(Glibc)
    /// `SOCK_STREAM`, close-on-exec from the start: a browser spawned while the receiver listens never
    /// inherits the listening socket (it would keep the port bound after the login ends).
    private let streamSocketType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
#else
    private let streamSocketType = Int32(SOCK_STREAM)
#endif

/// Binding the redirect receiver's listening socket (POSIX sockets; no server framework).
enum LoopbackSocket {
    /// A listening, non-blocking, close-on-exec socket on the first of `addresses` that can be bound
    /// (`127.0.0.1`, any free port, when `addresses` is empty).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for a non-loopback address unless
    ///   `allowsNonLoopback`; `LoginError` `.cannotListen` when none can be bound.
    static func listen(on addresses: [ListenAddress], allowsNonLoopback: Bool) throws -> (
        descriptor: Int32, host: String, port: Int
    ) {
        let candidates = addresses.isEmpty ? [ListenAddress.loopback] : addresses
        for address in candidates where !allowsNonLoopback && !address.isLoopback {
            throw LoginError(
                .invalidConfiguration,
                "the redirect receiver listens on loopback addresses only, and \(address) is not one; set allowsNonLoopbackListener to listen there"
            )
        }
        var failures: [String] = []
        for address in candidates {
            do {
                return try bindAndListen(address)
            } catch {
                failures.append(error.message)
            }
        }
        throw LoginError(
            .cannotListen, "could not listen for the browser's redirect: " + failures.joined(separator: "; "))
    }

    private static func bindAndListen(_ address: ListenAddress) throws(LoginError) -> (
        descriptor: Int32, host: String, port: Int
    ) {
        let host = address.host == "localhost" ? "127.0.0.1" : address.host
        guard (0...65535).contains(address.port) else {
            throw LoginError(.cannotListen, "\(address): the port is not 0…65535")
        }
        var ipv4 = in_addr()
        var ipv6 = in6_addr()
        let family: Int32
        if inet_pton(AF_INET, host, &ipv4) == 1 {
            family = AF_INET
        } else if inet_pton(AF_INET6, host, &ipv6) == 1 {
            family = AF_INET6
        } else {
            throw LoginError(.cannotListen, "\(address): not an IP address")
        }
        let descriptor = socket(family, streamSocketType, 0)
        guard descriptor >= 0 else {
            throw LoginError(.cannotListen, "\(address): \(systemErrorMessage(errno))")
        }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        var one: Int32 = 1
        let optionSize = socklen_t(MemoryLayout<Int32>.size)
        // Lets a port that a previous login just closed be bound again at once (connections it
        // answered may linger in TIME_WAIT); two listeners on one port are still refused.
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, optionSize)
        let port = UInt16(address.port).bigEndian
        let result: Int32
        if family == AF_INET {
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = port
            socketAddress.sin_addr = ipv4
            result = bindSocket(descriptor, to: socketAddress)
        } else {
            _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), Int32(IPV6_V6ONLY), &one, optionSize)
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = port
            socketAddress.sin6_addr = ipv6
            result = bindSocket(descriptor, to: socketAddress)
        }
        guard result == 0 else {
            let code = errno
            closeDescriptor(descriptor)
            throw LoginError(.cannotListen, "\(address): \(systemErrorMessage(code))")
        }
        guard startListening(descriptor) == 0, let chosenPort = boundPort(of: descriptor, family: family) else {
            let code = errno
            closeDescriptor(descriptor)
            throw LoginError(.cannotListen, "\(address): \(systemErrorMessage(code))")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        return (descriptor, host, chosenPort)
    }

    /// The port the system gave `descriptor`.
    private static func boundPort(of descriptor: Int32, family: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard result == 0 else { return nil }
        return withUnsafeMutablePointer(to: &storage) { pointer -> Int in
            if family == AF_INET {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin_port))
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                Int(UInt16(bigEndian: $0.pointee.sin6_port))
            }
        }
    }
}

/// `listen(2)` with a backlog of 128 (the kernel caps it at `net.core.somaxconn`): a browser opens a
/// few connections, but a burst of connections from elsewhere must not fill the queue — a browser's
/// connection refused by a full queue waits a second or more for its retry. (A free function
/// because `LoopbackSocket.listen(on:)` shadows the C name inside the enum.)
private func startListening(_ descriptor: Int32) -> Int32 {
    listen(descriptor, 128)
}

/// `bind(2)` with a `sockaddr_in` or `sockaddr_in6`.
private func bindSocket<Address>(_ descriptor: Int32, to address: Address) -> Int32 {
    withUnsafePointer(to: address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(MemoryLayout<Address>.size))
        }
    }
}
