// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
import Logging
import LoginKit
import PostgresNIO

/// The store's objects in PostgreSQL, each named with its schema so that none is looked up through
/// `search_path`, where another role may have put one of the same name: the profile table, and the
/// quarantine table and change function beside it (one of each per schema).
struct StoreObjects: Sendable, Equatable {
    /// The schema, as PostgreSQL names it.
    var schema: String
    /// The profile table's name, without its schema.
    var tableName: String

    /// `"schema"."table"`.
    var table: String { Self.quoted(schema) + "." + Self.quoted(tableName) }
    /// `"schema"."loginkit_quarantine"`.
    var quarantine: String { Self.quoted(schema) + "." + Self.quoted("loginkit_quarantine") }
    /// `"schema"."loginkit_notify_change"`.
    var function: String { Self.quoted(schema) + "." + Self.quoted("loginkit_notify_change") }
    /// The function's signature, as `to_regprocedure` reads it.
    var functionSignature: String { function + "()" }
    /// `schema.table`, as PostgreSQL names the table: what the quarantine table's `source_table` holds.
    var sourceTable: String { schema + "." + tableName }

    /// `identifier` as a quoted SQL identifier (`"` doubled).
    static func quoted(_ identifier: String) -> String {
        var quoted = "\""
        for character in identifier { quoted += character == "\"" ? "\"\"" : String(character) }
        return quoted + "\""
    }
}

extension PostgresTokenStore {
    /// The profile table ``migrate()`` creates: `CREATE TABLE IF NOT EXISTS`.
    func tableDefinition(_ objects: StoreObjects) -> String {
        """
        CREATE TABLE IF NOT EXISTS \(objects.table) (
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
    /// decode, moved aside with why and when, kept for ``Configuration/quarantineRetention``.
    func quarantineDefinition(_ objects: StoreObjects) -> String {
        """
        CREATE TABLE IF NOT EXISTS \(objects.quarantine) (
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
    ///
    /// A trigger runs as whoever writes the row, so the function's `search_path` is pinned to
    /// `pg_catalog` (and its calls name it): a function of the same name that another role put in
    /// a schema of the writer's `search_path` is never the one called.
    func functionDefinition(_ objects: StoreObjects) -> String {
        """
        CREATE OR REPLACE FUNCTION \(objects.functionSignature) RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $loginkit$
        DECLARE
            channel text := 'loginkit_' || TG_RELID::text;
            payload text;
        BEGIN
            IF TG_OP = 'TRUNCATE' THEN
                PERFORM pg_catalog.pg_notify(channel, '[]');
                RETURN NULL;
            END IF;
            IF TG_OP IN ('UPDATE', 'DELETE') THEN
                payload := pg_catalog.json_build_array(OLD.namespace, OLD.name)::text;
                PERFORM pg_catalog.pg_notify(channel, CASE WHEN pg_catalog.octet_length(payload) > 7000 THEN '[]' ELSE payload END);
            END IF;
            IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND (OLD.namespace, OLD.name) IS DISTINCT FROM (NEW.namespace, NEW.name)) THEN
                payload := pg_catalog.json_build_array(NEW.namespace, NEW.name)::text;
                PERFORM pg_catalog.pg_notify(channel, CASE WHEN pg_catalog.octet_length(payload) > 7000 THEN '[]' ELSE payload END);
            END IF;
            RETURN NULL;
        END
        $loginkit$
        """
    }

    /// What exists of the store's objects, who owns them, and who else may use the quarantine table.
    struct Inspection: Sendable {
        /// One object: whether it exists, its owner, and whether that is the connection's role or
        /// a role it is a member of by a grant (not a superuser's implicit membership of every role), or a superuser.
        struct Object: Sendable {
            var exists: Bool
            var owner: String?
            var isOurs: Bool
        }

        /// The connection's role (`current_user`).
        var role: String
        var table: Object
        var quarantine: Object
        var function: Object
        /// The roles besides its owner the quarantine table grants privileges to (`PUBLIC`:
        /// everyone), comma-separated; empty when only its owner may use it.
        var quarantineGrantees: String
        /// Whether the function pins its `search_path`.
        var functionIsPinned: Bool
        /// Whether both change triggers are on the table and call the function.
        var triggers: Bool
        /// Whether the connection's role may create objects in the schema.
        var mayCreate: Bool

        /// Whether ``migrate()`` has something to do: an object missing, or a function to pin that
        /// this role may replace.
        var needsMigration: Bool {
            !table.exists || !quarantine.exists || !function.exists || !triggers || (!functionIsPinned && mayCreate)
        }
    }

    /// One read-only query: which of the store's objects exist, whose they are, and to whom the
    /// quarantine table grants privileges. Every function it calls is named with `pg_catalog`.
    func inspect(_ objects: StoreObjects, query: (PostgresQuery) async throws -> PostgresRowSequence) async throws -> Inspection {
        let rows = try await query(
            """
            WITH RECURSIVE mine (oid) AS (
                SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = CURRENT_USER
                UNION
                SELECT m.roleid FROM pg_catalog.pg_auth_members AS m JOIN mine ON m.member = mine.oid
            ), trusted (oid) AS (
                SELECT mine.oid FROM mine UNION SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolsuper
            )
            SELECT current_user::text,
                t.oid IS NOT NULL, pg_catalog.pg_get_userbyid(t.relowner)::text, COALESCE(t.relowner IN (SELECT trusted.oid FROM trusted), false),
                q.oid IS NOT NULL, pg_catalog.pg_get_userbyid(q.relowner)::text, COALESCE(q.relowner IN (SELECT trusted.oid FROM trusted), false),
                COALESCE((SELECT pg_catalog.string_agg(DISTINCT CASE WHEN a.grantee = 0::oid THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END, ', ')
                          FROM pg_catalog.aclexplode(q.relacl) AS a WHERE a.grantee <> q.relowner), ''),
                f.oid IS NOT NULL, pg_catalog.pg_get_userbyid(f.proowner)::text, COALESCE(f.proowner IN (SELECT trusted.oid FROM trusted), false),
                EXISTS (SELECT FROM pg_catalog.unnest(f.proconfig) AS c(setting) WHERE c.setting LIKE 'search_path=%'),
                (SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger AS g WHERE g.tgrelid = t.oid AND g.tgfoid = f.oid
                    AND g.tgname IN ('loginkit_notify', 'loginkit_notify_truncate')) = 2,
                COALESCE((SELECT pg_catalog.has_schema_privilege(n.oid, 'CREATE') FROM pg_catalog.pg_namespace AS n
                          WHERE n.nspname = \(objects.schema)::name), false)
            FROM (VALUES (1)) AS one (x)
                LEFT JOIN pg_catalog.pg_class AS t ON t.oid = pg_catalog.to_regclass(\(objects.table))::oid
                LEFT JOIN pg_catalog.pg_class AS q ON q.oid = pg_catalog.to_regclass(\(objects.quarantine))::oid
                LEFT JOIN pg_catalog.pg_proc AS f ON f.oid = pg_catalog.to_regprocedure(\(objects.functionSignature))::oid
            """)
        var found: Inspection?
        for try await (role, table, tableOwner, tableIsOurs, quarantine, quarantineOwner, quarantineIsOurs, grantees, function, functionOwner, functionIsOurs, pinned, triggers, mayCreate)
            in rows.decode((String, Bool, String?, Bool, Bool, String?, Bool, String, Bool, String?, Bool, Bool, Bool, Bool).self)
        {
            found = Inspection(
                role: role,
                table: .init(exists: table, owner: tableOwner, isOurs: tableIsOurs),
                quarantine: .init(exists: quarantine, owner: quarantineOwner, isOurs: quarantineIsOurs),
                function: .init(exists: function, owner: functionOwner, isOurs: functionIsOurs),
                quarantineGrantees: grantees, functionIsPinned: pinned, triggers: triggers, mayCreate: mayCreate)
        }
        guard let found else { throw TokenStoreError(.io, path: location, "PostgreSQL answered nothing when asked about the store's tables") }
        return found
    }

    /// Refuses objects another role controls — whoever owns the table reads and changes every
    /// profile written to it, and the function runs as the writer of every row — and a quarantine
    /// table that others may use: it keeps the payloads of rows that did not decode.
    func check(_ inspection: Inspection, _ objects: StoreObjects) throws(TokenStoreError) {
        let owned: [(kind: String, name: String, object: Inspection.Object)] = [
            ("table", objects.table, inspection.table),
            ("quarantine table", objects.quarantine, inspection.quarantine),
            ("change function", objects.functionSignature, inspection.function),
        ]
        for (kind, name, object) in owned where object.exists && !object.isOurs {
            throw TokenStoreError(
                .wrongOwner, path: location,
                "the \(kind) \(name) belongs to the role \(object.owner ?? "unknown"), not to this connection's role \(inspection.role) nor a role it is a member of: another role may have made it to read or change the profiles written there (a trigger runs as whoever writes). Nothing was written. Drop it, or give it to a role you trust (ALTER … OWNER TO), or put the table in a schema only your roles may create in (PostgresTokenStore.Configuration.table = \"schema.name\")")
        }
        guard inspection.quarantineGrantees.isEmpty else {
            throw TokenStoreError(
                .insecurePermissions, path: location,
                "the quarantine table \(objects.quarantine) grants privileges to \(inspection.quarantineGrantees): it keeps the payloads of rows that did not decode, which may hold tokens, and only its owner may use it; REVOKE ALL ON \(objects.quarantine) FROM \(inspection.quarantineGrantees)")
        }
    }

    /// ``migrate()`` when the table, the quarantine table, the function or the change triggers are
    /// missing; when all are there, one read-only query that checks whose they are (no lock, no DDL:
    /// a role that may not create tables or functions can use those set up once by a role it is a
    /// member of), then the deletion of quarantined rows past their retention.
    /// ``withStore(_:configuration:_:)`` and the CLI call this.
    ///
    /// - Throws: `TokenStoreError` `.wrongOwner` for an object another role owns,
    ///   `.insecurePermissions` for a quarantine table that grants privileges to other roles.
    package func migrateWhenMissing() async throws {
        let objects = try await storeObjects()
        let inspection = try await withDeadline(configuration.operationTimeout) { [self] in
            try await self.inspect(objects) { try await self.client.query($0, logger: self.configuration.logger) }
        }
        if inspection.needsMigration {
            try await migrate()
            return
        }
        try check(inspection, objects)
        if !inspection.functionIsPinned {
            configuration.logger.notice(
                "the change function does not pin its search_path (made by an older LoginKit); run migrate() as a role that may create in the schema",
                metadata: ["function": "\(objects.functionSignature)"])
        }
        let deletion = expiredQuarantineDeletion(objects)
        try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] () async throws -> Void in
            _ = try await client.query(deletion, logger: logger)
        }
    }

    /// Creates what is missing of the table, the quarantine table, the change function and its
    /// triggers, all in the table's schema, after checking that what exists is this role's (or a
    /// role it is a member of) and before checking it all again; then deletes quarantined rows past
    /// their retention. Idempotent; concurrent callers (any table, any host) serialise on one
    /// advisory lock (concurrent `CREATE TABLE IF NOT EXISTS` can fail on PostgreSQL's catalog).
    /// Nothing that exists is replaced but a change function that does not pin its `search_path`,
    /// and the DDL waits at most `operationTimeout` for a table lock, so a migration never queues
    /// the fleet's writes behind it for long.
    ///
    /// - Throws: `TokenStoreError` `.wrongOwner` for an object another role owns (nothing is
    ///   created then), `.insecurePermissions` for a quarantine table that grants privileges to
    ///   other roles, `.unavailable` when PostgreSQL does not answer in time.
    public func migrate() async throws {
        let objects = try await storeObjects()
        let definitions = (table: tableDefinition(objects), quarantine: quarantineDefinition(objects), function: functionDefinition(objects))
        let lockTimeout = "\(max(1, Int(configuration.operationTimeout.components.seconds)) * 1000)ms"
        let deletion = expiredQuarantineDeletion(objects)
        try await withDeadline(configuration.operationTimeout * 2) { [self] in
            let logger = self.configuration.logger
            try await self.client.withTransaction(logger: logger) { connection in
                try await connection.query("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('loginkit:migrate', 0))", logger: logger)
                let found = try await self.inspect(objects) { try await connection.query($0, logger: logger) }
                // Nothing is made in, on or beside an object another role controls.
                try self.check(found, objects)
                var statements: [String] = []
                if !found.table.exists { statements.append(definitions.table) }
                if !found.quarantine.exists { statements.append(definitions.quarantine) }
                if !found.function.exists || (!found.functionIsPinned && found.mayCreate) { statements.append(definitions.function) }
                if !found.triggers {
                    statements += [
                        "DROP TRIGGER IF EXISTS loginkit_notify ON \(objects.table)",
                        "DROP TRIGGER IF EXISTS loginkit_notify_truncate ON \(objects.table)",
                        "CREATE TRIGGER loginkit_notify AFTER INSERT OR UPDATE OR DELETE ON \(objects.table) FOR EACH ROW EXECUTE FUNCTION \(objects.functionSignature)",
                        "CREATE TRIGGER loginkit_notify_truncate AFTER TRUNCATE ON \(objects.table) FOR EACH STATEMENT EXECUTE FUNCTION \(objects.functionSignature)",
                    ]
                }
                if !statements.isEmpty {
                    try await connection.query("SELECT pg_catalog.set_config('lock_timeout', \(lockTimeout), true)", logger: logger)
                    for statement in statements {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    // What was made is this role's; a default privilege may still have granted the
                    // new quarantine table to others.
                    let made = try await self.inspect(objects) { try await connection.query($0, logger: logger) }
                    try self.check(made, objects)
                }
                try await connection.query(deletion, logger: logger)
            }
        }
    }

    /// Deletes the quarantine table's rows older than ``Configuration/quarantineRetention`` (capped
    /// at 100 years, which PostgreSQL's intervals hold).
    func expiredQuarantineDeletion(_ objects: StoreObjects) -> PostgresQuery {
        let seconds = min(configuration.quarantineRetention.timeInterval, 100 * 365.25 * 86400)
        return "DELETE FROM \(unescaped: objects.quarantine) WHERE quarantined_at < pg_catalog.now() - pg_catalog.make_interval(0, 0, 0, 0, 0, 0, \(seconds))"
    }

    /// The table's oid, when its change triggers are there and enabled: what ``run()`` listens for.
    /// `nil` when the table or a trigger is missing or disabled (`ALTER TABLE … DISABLE TRIGGER`).
    func listenableTable() async throws -> UInt32? {
        let objects = try await storeObjects()
        return try await withDeadline(configuration.operationTimeout) { [client, logger = configuration.logger] in
            let rows = try await client.query(
                """
                SELECT c.oid::int8 FROM pg_catalog.pg_class AS c WHERE c.oid = pg_catalog.to_regclass(\(objects.table))::oid
                    AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger AS t WHERE t.tgrelid = c.oid AND t.tgenabled <> 'D'
                         AND t.tgname IN ('loginkit_notify', 'loginkit_notify_truncate')) = 2
                """, logger: logger)
            var oid: UInt32?
            for try await value in rows.decode(Int64.self) { oid = UInt32(exactly: value) }
            return oid
        }
    }
}
#endif
