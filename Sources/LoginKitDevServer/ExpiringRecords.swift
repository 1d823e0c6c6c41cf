// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A record that stops being valid at `expiresAt`.
protocol DevExpiring {
    var expiresAt: Date { get }
}

/// Records by key that expire, kept bounded: each insertion that finds the table at its sweep mark
/// first drops the expired records, and the next mark is twice what is left (at least
/// `minimumSweep`), so sweeping costs amortized constant time per insertion and the table never
/// holds more than twice its live records (or `minimumSweep`).
struct ExpiringRecords<Record: DevExpiring> {
    /// The smallest sweep mark.
    static var minimumSweep: Int { 1024 }

    private var records: [String: Record] = [:]
    /// `minimumSweep` until the first sweep.
    private var sweepMark = 1024

    /// How many records are held, expired ones not yet swept included.
    var count: Int { records.count }

    /// The record for `key`, expired or not; setting `nil` removes it. Setting does not sweep.
    subscript(key: String) -> Record? {
        get { records[key] }
        set { records[key] = newValue }
    }

    /// Stores `record` under `key`, sweeping first when the table has reached its mark.
    mutating func insert(_ record: Record, for key: String, now: Date) {
        sweep(now: now)
        records[key] = record
    }

    /// Drops the records expired at `now` when the table has reached its sweep mark, or at once when
    /// `force` is set (a table at a hard cap must not wait for a mark it can never reach).
    mutating func sweep(now: Date, force: Bool = false) {
        guard force || records.count >= sweepMark else { return }
        records = records.filter { $0.value.expiresAt > now }
        sweepMark = max(Self.minimumSweep, records.count * 2)
    }

    /// Removes and returns the record for `key`.
    mutating func removeValue(forKey key: String) -> Record? {
        records.removeValue(forKey: key)
    }

    /// Applies `change` to every record.
    mutating func modifyAll(_ change: (inout Record) -> Void) {
        records = records.mapValues { record in
            var changed = record
            change(&changed)
            return changed
        }
    }
}
#endif
