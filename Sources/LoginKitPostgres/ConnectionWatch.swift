// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
import LoginKitHTTP
import NIOCore
import PostgresNIO

/// Tells the transaction that uses a connection, at once, that the connection closed — whatever
/// that transaction's task is waiting for: PostgresNIO (1.33) never answers a query sent on a
/// connection already closed, and a lock wait must not outlast the connection it waits on.
///
/// One callback per connection on its `closeFuture`, registered the first time the connection is
/// watched and dropped when it fires; the transactions that lease the connection in turn set and
/// clear what it calls. So the callbacks do not pile up on a long-lived connection, and the table
/// holds only connections that are open.
final class ConnectionWatch: Sendable {
    private struct Entry: Sendable {
        var onClose: (@Sendable () -> Void)?
    }

    private let entries = LockedState<[PostgresConnection.ID: Entry]>([:])

    /// Calls `onClose` once `connection` closes (at once if it has), unless ``unwatch(_:)`` comes first.
    func watch(_ connection: PostgresConnection, onClose: @escaping @Sendable () -> Void) {
        let id = connection.id
        let isNew = entries.withLock { entries -> Bool in
            let isNew = entries[id] == nil
            entries[id] = Entry(onClose: onClose)
            return isNew
        }
        guard isNew else { return }
        connection.closeFuture.whenComplete { [weak self] _ in
            guard let self else { return }
            let entry = self.entries.withLock { $0.removeValue(forKey: id) }
            entry?.onClose?()
        }
    }

    /// Stops calling what ``watch(_:onClose:)`` set for `connection` (its transaction is over).
    func unwatch(_ connection: PostgresConnection) {
        let id = connection.id
        entries.withLock { entries in
            if entries[id] != nil { entries[id] = Entry(onClose: nil) }
        }
    }
}
#endif
