// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
import Logging
import PostgresNIO

extension PostgresTokenStore {
    /// The SQL ``migrate()`` runs: `CREATE TABLE IF NOT EXISTS`, safe to run from many hosts at once.
    package var schema: String {
        """
        CREATE TABLE IF NOT EXISTS \(table) (
            namespace  text        NOT NULL,
            name       text        NOT NULL,
            format     integer     NOT NULL,
            sealed     boolean     NOT NULL,
            payload    bytea       NOT NULL,
            version    bigint      NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace, name)
        )
        """
    }

    /// The quarantine table (one per schema, shared by the profile tables in it): rows that did not
    /// decode, moved aside with why and when, never deleted by LoginKit.
    package var quarantineSchema: String {
        """
        CREATE TABLE IF NOT EXISTS \(quarantineTable) (
            id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            source_table   text        NOT NULL,
            namespace      text        NOT NULL,
            name           text        NOT NULL,
            format         integer     NOT NULL,
            sealed         boolean     NOT NULL,
            payload        bytea       NOT NULL,
            version        bigint      NOT NULL,
            updated_at     timestamptz NOT NULL,
            quarantined_at timestamptz NOT NULL DEFAULT now(),
            reason         text        NOT NULL
        )
        """
    }

    /// The trigger function (one per schema): notifies `loginkit_<the table's oid>` of every
    /// committed change to a row, `[namespace, name]` (a rename notifies the old and the new name),
    /// or to the whole table, `[]` (`TRUNCATE`, or a name too long for a notification). Keyed by
    /// the table's oid, so hosts that spell the table differently (`t`, `public.t`) share a channel.
    var notifyFunction: (name: String, signature: String, definition: String) {
        let name = (table.split(separator: ".").dropLast().map(String.init) + ["\"loginkit_notify_change\""]).joined(separator: ".")
        let definition = """
            CREATE OR REPLACE FUNCTION \(name)() RETURNS trigger LANGUAGE plpgsql AS $loginkit$
            DECLARE
                channel text := 'loginkit_' || TG_RELID::text;
                payload text;
            BEGIN
                IF TG_OP = 'TRUNCATE' THEN
                    PERFORM pg_notify(channel, '[]');
                    RETURN NULL;
                END IF;
                IF TG_OP IN ('UPDATE', 'DELETE') THEN
                    payload := json_build_array(OLD.namespace, OLD.name)::text;
                    PERFORM pg_notify(channel, CASE WHEN octet_length(payload) > 7000 THEN '[]' ELSE payload END);
                END IF;
                IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND (OLD.namespace, OLD.name) IS DISTINCT FROM (NEW.namespace, NEW.name)) THEN
                    payload := json_build_array(NEW.namespace, NEW.name)::text;
                    PERFORM pg_notify(channel, CASE WHEN octet_length(payload) > 7000 THEN '[]' ELSE payload END);
                END IF;
                RETURN NULL;
            END
            $loginkit$
            """
        return (name, name + "()", definition)
    }

    /// What ``migrate()`` has to create: (table, quarantine table, function, triggers).
    private struct Missing {
        var table = true, quarantine = true, function = true, triggers = true
        var nothing: Bool { !table && !quarantine && !function && !triggers }
    }

    /// One read-only query: which parts of the schema are missing (triggers count only when they
    /// call LoginKit's function).
    private static func missing(table: String, quarantine: String, function: String, query: (PostgresQuery) async throws -> PostgresRowSequence) async throws -> Missing {
        let rows = try await query(
            """
            SELECT to_regclass(\(table)) IS NULL, to_regclass(\(quarantine)) IS NULL, to_regprocedure(\(function)) IS NULL,
                (SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(\(table)) AND tgfoid = to_regprocedure(\(function))
                    AND tgname IN ('loginkit_notify', 'loginkit_notify_truncate')) <> 2
            """)
        var missing = Missing()
        for try await (table, quarantine, function, triggers) in rows.decode((Bool, Bool, Bool, Bool).self) {
            missing = Missing(table: table, quarantine: quarantine, function: function, triggers: triggers)
        }
        return missing
    }

    /// ``migrate()`` when the table, the quarantine table, the function or the change triggers are
    /// missing; when all are there, one read-only query (no lock, no DDL: a role that may not create
    /// tables or functions can use a table set up once by its owner). ``withStore(_:configuration:_:)``
    /// and the CLI call this.
    package func migrateWhenMissing() async throws {
        let (table, quarantine, function) = (self.table, quarantineTable, notifyFunction.signature)
        let missing = try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] in
            try await Self.missing(table: table, quarantine: quarantine, function: function) { try await client.query($0, logger: logger) }
        }
        if !missing.nothing { try await migrate() }
    }

    /// Creates what is missing of the table, the quarantine table, the change function and its
    /// triggers. Idempotent; concurrent callers (any table, any host) serialise on one advisory lock
    /// (concurrent `CREATE TABLE IF NOT EXISTS` can fail on PostgreSQL's catalog). Nothing that
    /// exists is replaced, and the DDL waits at most `operationTimeout` for a table lock, so a
    /// migration never queues the fleet's writes behind it for long.
    public func migrate() async throws {
        let (table, quarantine) = (self.table, quarantineTable)
        let function = notifyFunction
        let (schema, quarantineSchema) = (self.schema, self.quarantineSchema)
        let lockTimeout = "\(max(1, Int(configuration.operationTimeout.components.seconds)) * 1000)ms"
        try await withDeadline(configuration.operationTimeout * 2) { [client, logger = configuration.logger] in
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended('loginkit:migrate', 0))", logger: logger)
                let missing = try await Self.missing(table: table, quarantine: quarantine, function: function.signature) {
                    try await connection.query($0, logger: logger)
                }
                guard !missing.nothing else { return }
                try await connection.query("SELECT set_config('lock_timeout', \(lockTimeout), true)", logger: logger)
                var statements: [String] = []
                if missing.table { statements.append(schema) }
                if missing.quarantine { statements.append(quarantineSchema) }
                if missing.function { statements.append(function.definition) }
                if missing.triggers {
                    statements += [
                        "DROP TRIGGER IF EXISTS loginkit_notify ON \(table)",
                        "DROP TRIGGER IF EXISTS loginkit_notify_truncate ON \(table)",
                        "CREATE TRIGGER loginkit_notify AFTER INSERT OR UPDATE OR DELETE ON \(table) FOR EACH ROW EXECUTE FUNCTION \(function.signature)",
                        "CREATE TRIGGER loginkit_notify_truncate AFTER TRUNCATE ON \(table) FOR EACH STATEMENT EXECUTE FUNCTION \(function.signature)",
                    ]
                }
                for statement in statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
            }
        }
    }

    /// The table's oid, when its change triggers are there and enabled: what ``run()`` listens for.
    /// `nil` when the table or a trigger is missing or disabled (`ALTER TABLE … DISABLE TRIGGER`).
    func listenableTable() async throws -> UInt32? {
        let table = self.table
        return try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] in
            let rows = try await client.query(
                """
                SELECT c.oid::int8 FROM pg_class c WHERE c.oid = to_regclass(\(table))
                    AND (SELECT count(*) FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgenabled <> 'D'
                         AND t.tgname IN ('loginkit_notify', 'loginkit_notify_truncate')) = 2
                """, logger: logger)
            var oid: UInt32?
            for try await value in rows.decode(Int64.self) { oid = UInt32(exactly: value) }
            return oid
        }
    }
}
#endif
