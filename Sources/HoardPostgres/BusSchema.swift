#if Postgres
internal import Logging
internal import PostgresNIO

// What the bus keeps in PostgreSQL. Every name is a constant of this file: no table, channel or
// function name is ever built from text a caller or a row supplies.
//
// Order: a reader asks for the changes after its position, so sequence order must be commit
// order. A plain sequence does not give that: a transaction that took number 7 may commit after
// one that took 8, and a reader that saw 8 would skip 7 for ever. hoard_publish takes a
// transaction-scoped advisory lock before it takes its number, so appends are serialized from
// their number to their commit, and a row that becomes visible never has a number below one seen
// before it.
/// What a change row announces (the `kind` column).
enum ChangeKind: Int16 {
    case keys = 0
    case tags = 1
    case all = 2
}

enum BusSchema {
    /// The newest version of the tables and functions this code knows; a database holding a newer
    /// one is refused. A database is brought up to ``baseVersion``; it becomes version 3 when the
    /// first tag or clear is published, since a replica of version 2 would take a tag for a key,
    /// and version 4 when a replica that shares fills connects, since a replica of version 3
    /// would put back a `hoard_publish` that leaves obsolete fills in place.
    static let version = 4
    /// The version that tags and clears need.
    static let tagsVersion = 3
    /// The version that shared fills need.
    static let sharedFillsVersion = 4
    /// The version a migration brings a database to.
    static let baseVersion = 2
    /// The channel every notification goes to; the payload says which: `d|…` a change
    /// (``BusNotice``), `c` a change too large to carry (followed by the origin store's UUID,
    /// when a store published it), `a` applied, `w…` a wait for replicas, `f|…` a shared fill ended.
    static let channel = "hoard_bus"
    /// The advisory lock keys: one serializes appends, one migrations ('HOARDAPP', 'HOARDMIG' as numbers).
    static let appendLock: Int64 = 0x484F_4152_4441_5050
    static let migrationLock: Int64 = 0x484F_4152_444D_4947

    /// The condition that a replica row is live: it has not left, and the lease PostgreSQL last
    /// granted it, margin included, has not run out as of the statement's start (`now()`, taken
    /// before the statement's snapshot: a grant committed after that snapshot was answered after
    /// this moment, too late to stretch the lease it renews; docs/REPLICAS.md, "The lease").
    /// A row of an earlier Hoard, which holds no lease, is live while its heartbeat is younger
    /// than ``earlierLiveness``, counted from PostgreSQL's start when that is later (such a replica could
    /// not beat while PostgreSQL was away).
    static func live(_ prefix: String = "") -> String {
        """
        \(prefix)left_at IS NULL AND CASE WHEN \(prefix)lease_until IS NULL \
        THEN greatest(\(prefix)heartbeat_at, pg_postmaster_start_time()) > now() - make_interval(secs => \(earlierLiveness.seconds)) \
        ELSE \(prefix)lease_until > now() END
        """
    }

    /// How long a replica of an earlier Hoard, which renews no lease, counts as live after its
    /// heartbeat: the `liveness` those versions had by default.
    static let earlierLiveness = Duration.seconds(30)

    /// A lease's grant: what a renewal or a registration sets, for a lease of `length` (the
    /// replica's lease and margin).
    static func grant(_ length: Duration) -> String {
        """
        heartbeat_at = now(), lease_until = now() + make_interval(secs => \(length.seconds))
        """
    }

    /// One row: how many changes after `applied` a replica `store` has to apply (those of others),
    /// and how long the oldest has waited in seconds; the arguments are SQL expressions.
    static func lag(_ applied: String, _ store: String) -> String {
        """
        SELECT count(*) AS changes, coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS seconds
        FROM hoard_changes c WHERE c.id > \(applied) AND c.origin IS DISTINCT FROM \(store)
        """
    }

    static let statements: [String] = [
        """
        CREATE TABLE IF NOT EXISTS hoard_bus (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            schema_version integer NOT NULL,
            log_id uuid NOT NULL DEFAULT gen_random_uuid(),
            trimmed_through bigint NOT NULL DEFAULT 0)
        """,
        "CREATE SEQUENCE IF NOT EXISTS hoard_change_ids",
        """
        CREATE TABLE IF NOT EXISTS hoard_changes (
            id bigint PRIMARY KEY,
            origin uuid,
            collection text NOT NULL,
            keys bytea[] NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now())
        """,
        """
        CREATE TABLE IF NOT EXISTS hoard_replicas (
            store_id uuid PRIMARY KEY,
            name text NOT NULL DEFAULT '',
            applied bigint NOT NULL DEFAULT 0,
            applied_at timestamptz,
            heartbeat_at timestamptz NOT NULL DEFAULT now())
        """,
        // Version 2: a replica that stops says so (it is then not live, and the log is still
        // kept for it within the retention).
        "ALTER TABLE hoard_replicas ADD COLUMN IF NOT EXISTS left_at timestamptz",
        // Still version 2: the lease, which replicas of an earlier Hoard leave NULL (they are
        // judged by their heartbeat, as before), and the number of its last grant, which a renewal
        // must name (PostgresBus+Lease.swift). Earlier replicas write neither and read neither.
        "ALTER TABLE hoard_replicas ADD COLUMN IF NOT EXISTS lease_until timestamptz",
        "ALTER TABLE hoard_replicas ADD COLUMN IF NOT EXISTS lease_grant bigint NOT NULL DEFAULT 0",
        // Version 3: what a change announces (ChangeKind): records' keys (0, as every change
        // before), tags whose records are no longer current (1, the tags' UTF-8 in `keys`), or a
        // whole collection (2, `keys` not read). The column and the functions are made by every
        // migration; the version becomes 3 with the first tag or clear published (hoard_publish),
        // so that a replica of version 2, which would take a tag for a key, then refuses the
        // database when it connects, while a fleet that uses no tags upgrades replica by replica.
        "ALTER TABLE hoard_changes ADD COLUMN IF NOT EXISTS kind smallint NOT NULL DEFAULT 0",
        // Version 4: the shared fills (SharedFills.swift), made by every migration, as `hoard_publish`
        // deletes from them. UNLOGGED: a fill is a cache entry, which a crash of PostgreSQL may lose
        // (the table is then empty, and the replicas fetch again) but no change can leave behind;
        // and no fill costs a write of the WAL. `record` is NULL while a replica holds the lease
        // (`lease_token`, until `lease_until`) and fetches; `began_at` is the log's head when the
        // lease was taken.
        """
        CREATE UNLOGGED TABLE IF NOT EXISTS hoard_fills (
            collection text NOT NULL,
            key bytea NOT NULL,
            record bytea,
            tags bytea[] NOT NULL DEFAULT '{}',
            expires_at timestamptz,
            began_at bigint NOT NULL,
            lease_token bigint,
            lease_until timestamptz,
            filled_at timestamptz,
            PRIMARY KEY (collection, key))
        """,
        "CREATE INDEX IF NOT EXISTS hoard_fills_filled_at ON hoard_fills (filled_at)",
        "CREATE SEQUENCE IF NOT EXISTS hoard_fill_tokens",
        // The notification carries the change (BusNotice), with the number of the append before
        // it, so that a replica whose position is that number applies it without reading the log.
        // Still version 2: the tables and what the function does to them are the same, and a
        // replica of an older Hoard takes any notification but `a` for a wake-up (and its
        // migration puts back a function whose notifications are wake-ups only, which this
        // version answers by reading the log). The sequence's last value is read under the append
        // lock: every number is taken under it, so that is the number taken just before, whether
        // its transaction committed or not (a number rolled back matches no replica's position,
        // which then reads the log). A payload past PostgreSQL's 8,000 bytes, or with a NULL key,
        // carries no change.
        """
        CREATE OR REPLACE FUNCTION hoard_publish(p_origin uuid, p_collection text, p_keys bytea[], p_kind smallint)
        RETURNS bigint LANGUAGE plpgsql AS $$
        DECLARE
            new_id bigint;
            previous bigint;
            payload text;
        BEGIN
            PERFORM pg_advisory_xact_lock(\(appendLock));
            IF p_kind <> 0 THEN
                UPDATE hoard_bus SET schema_version = \(tagsVersion) WHERE schema_version < \(tagsVersion);
            END IF;
            SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO previous FROM hoard_change_ids;
            new_id := nextval('hoard_change_ids');
            INSERT INTO hoard_changes (id, origin, collection, keys, kind)
                VALUES (new_id, p_origin, p_collection, p_keys, p_kind);
            -- The shared fills the change makes obsolete go with it, and so do the leases of fetches
            -- it may have overtaken (any lease, for a tag: a fetch's tags are not known before it
            -- ends), so that no fill begun before this change is stored after it.
            IF p_kind = 0 THEN
                DELETE FROM hoard_fills WHERE collection = p_collection AND key = ANY(p_keys);
            ELSIF p_kind = 1 THEN
                DELETE FROM hoard_fills WHERE collection = p_collection AND (record IS NULL OR tags && p_keys);
            ELSE
                DELETE FROM hoard_fills WHERE collection = p_collection;
            END IF;
            -- Only keys travel in a notification: a replica reads tags and clears from the log.
            IF p_kind = 0 AND array_position(p_keys, NULL) IS NULL THEN
                payload := concat_ws('|', 'd', coalesce((SELECT log_id::text FROM hoard_bus LIMIT 1), ''),
                    previous, new_id, coalesce(p_origin::text, ''),
                    array_to_string(ARRAY(SELECT encode(k, 'hex') FROM unnest(p_keys) AS k), ','), p_collection);
            END IF;
            IF payload IS NULL OR octet_length(payload) > 7999 THEN
                payload := 'c' || coalesce(p_origin::text, '');
            END IF;
            PERFORM pg_notify('\(channel)', payload);
            RETURN new_id;
        END $$
        """,
        // The form of version 2 and of the row trigger: records' keys.
        """
        CREATE OR REPLACE FUNCTION hoard_publish(p_origin uuid, p_collection text, p_keys bytea[])
        RETURNS bigint LANGUAGE sql AS $$ SELECT hoard_publish(p_origin, p_collection, p_keys, 0::smallint) $$
        """,
        // Hoard's key bytes of an ID (docs/FORMAT.md, "Keys"): Int and Int64 are the big-endian
        // bytes of the value with its sign bit flipped, String a 0x01 then its UTF-8, UUID its 16 bytes.
        """
        CREATE OR REPLACE FUNCTION hoard_key_int(bigint) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT AS
        $$ SELECT int8send($1 # (-9223372036854775807 - 1)) $$
        """,
        """
        CREATE OR REPLACE FUNCTION hoard_key_text(text) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT AS
        $$ SELECT '\\x01'::bytea || convert_to($1, 'UTF8') $$
        """,
        """
        CREATE OR REPLACE FUNCTION hoard_key_uuid(uuid) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT AS
        $$ SELECT uuid_send($1) $$
        """,
        // A row trigger: hoard_announce_row('collection', 'id column', 'int' | 'text' | 'uuid').
        // Announces the row's ID (both IDs when an update changes it) in the writer's transaction.
        """
        CREATE OR REPLACE FUNCTION hoard_announce_row() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            ids text[];
            keys bytea[];
            id text;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                ids := ARRAY[to_jsonb(NEW) ->> TG_ARGV[1]];
            ELSIF TG_OP = 'DELETE' THEN
                ids := ARRAY[to_jsonb(OLD) ->> TG_ARGV[1]];
            ELSE
                ids := ARRAY[to_jsonb(NEW) ->> TG_ARGV[1]];
                IF (to_jsonb(OLD) ->> TG_ARGV[1]) IS DISTINCT FROM ids[1] THEN
                    ids := ids || (to_jsonb(OLD) ->> TG_ARGV[1]);
                END IF;
            END IF;
            keys := ARRAY[]::bytea[];
            FOREACH id IN ARRAY ids LOOP
                keys := keys || CASE TG_ARGV[2]
                    WHEN 'int' THEN hoard_key_int(id::bigint)
                    WHEN 'uuid' THEN hoard_key_uuid(id::uuid)
                    WHEN 'text' THEN hoard_key_text(id)
                END;
            END LOOP;
            PERFORM hoard_publish(NULL, TG_ARGV[0], keys);
            RETURN NULL;
        END $$
        """,
        // A shared fill's first step (SharedFills.swift): for each key, the record held (one not
        // expired), or the lease, taken when nobody holds it or its holder's ran out (with the
        // milliseconds left of another's). Under the append lock, shared: a lease is either taken
        // before a publication, whose deletion then voids it, or after its commit, so that the
        // fetch it begins sees the change. The outer query reads the table as it was before the
        // insertion: a key neither held nor leased there (a row another replica inserted
        // meanwhile) has neither, and is asked for again.
        """
        CREATE OR REPLACE FUNCTION hoard_fill_begin(p_collection text, p_keys bytea[], p_lease_ms bigint)
        RETURNS TABLE (
            o_key bytea, o_record bytea, o_tags bytea[], o_expires_ms bigint, o_token bigint, o_wait_ms bigint)
        LANGUAGE sql AS $$
            SELECT pg_advisory_xact_lock_shared(\(appendLock));
            WITH wanted AS (SELECT DISTINCT k FROM unnest(p_keys) AS k),
            head AS (SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS position FROM hoard_change_ids),
            taken AS (
                INSERT INTO hoard_fills AS f (collection, key, began_at, lease_token, lease_until)
                SELECT p_collection, w.k, head.position, nextval('hoard_fill_tokens'),
                    now() + p_lease_ms * interval '1 millisecond'
                FROM wanted w CROSS JOIN head
                ON CONFLICT (collection, key) DO UPDATE SET
                    record = NULL, tags = '{}', expires_at = NULL, filled_at = NULL, began_at = EXCLUDED.began_at,
                    lease_token = EXCLUDED.lease_token, lease_until = EXCLUDED.lease_until
                WHERE (f.record IS NOT NULL AND f.expires_at <= now()) OR (f.record IS NULL AND f.lease_until <= now())
                RETURNING f.key, f.lease_token)
            SELECT w.k,
                CASE WHEN t.key IS NULL THEN f.record END,
                CASE WHEN t.key IS NULL THEN f.tags END,
                CASE WHEN t.key IS NULL AND f.record IS NOT NULL
                    THEN (extract(epoch FROM f.expires_at) * 1000)::bigint END,
                t.lease_token,
                CASE WHEN t.key IS NULL AND f.record IS NULL
                    THEN greatest(ceil(extract(epoch FROM f.lease_until - now()) * 1000), 0)::bigint END
            FROM wanted w LEFT JOIN taken t ON t.key = w.k
                LEFT JOIN hoard_fills f ON f.collection = p_collection AND f.key = w.k
        $$
        """,
        // Its last step: the fetched record stored under the lease (or, without a record, the
        // lease given up), unless a change voided the lease or another replica took it over
        // (`false`); the waiters are told either way (`f|KEY|COLLECTION`).
        """
        CREATE OR REPLACE FUNCTION hoard_fill_end(
            p_collection text, p_key bytea, p_token bigint, p_record bytea, p_tags bytea[], p_expires_ms bigint)
        RETURNS boolean LANGUAGE sql AS $$
            SELECT pg_notify('\(channel)', 'f|' || encode(p_key, 'hex') || '|' || p_collection);
            WITH ended AS (
                UPDATE hoard_fills SET record = p_record, tags = coalesce(p_tags, '{}'),
                    expires_at = to_timestamp(p_expires_ms / 1000.0), lease_token = NULL, lease_until = NULL,
                    filled_at = now()
                WHERE collection = p_collection AND key = p_key AND lease_token = p_token AND p_record IS NOT NULL
                RETURNING 1),
            released AS (
                DELETE FROM hoard_fills
                WHERE collection = p_collection AND key = p_key AND lease_token = p_token AND p_record IS NULL
                RETURNING 1)
            SELECT EXISTS (SELECT 1 FROM ended) OR EXISTS (SELECT 1 FROM released)
        $$
        """,
    ]

    /// Creates the tables and functions, or checks them, in one transaction that concurrent
    /// migrations (replicas starting together) take one at a time.
    /// With `sharingFills`, the database becomes version 4 (``sharedFillsVersion``) in the same
    /// transaction that made this version's `hoard_publish`.
    static func migrate(_ client: PostgresClient, sharingFills: Bool = false, logger: Logger) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
            // The table first, to read a version before changing anything else.
            try await connection.query(PostgresQuery(unsafeSQL: statements[0]), logger: logger)
            let rows = try await connection.query("SELECT schema_version FROM hoard_bus", logger: logger)
            var found: Int?
            for try await (version) in rows.decode(Int.self) { found = version }
            if let found, found > version {
                throw PostgresBusError.newerSchema(found: found, supported: version)
            }
            for statement in statements.dropFirst() {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            if found == nil {
                try await connection.query(
                    "INSERT INTO hoard_bus (schema_version) VALUES (\(baseVersion))", logger: logger)
            } else {
                try await connection.query(
                    "UPDATE hoard_bus SET schema_version = \(baseVersion) WHERE schema_version < \(baseVersion)",
                    logger: logger)
            }
            if sharingFills {
                try await connection.query(
                    """
                    UPDATE hoard_bus SET schema_version = \(sharedFillsVersion)
                    WHERE schema_version < \(sharedFillsVersion)
                    """, logger: logger)
            }
        }
    }
}
#endif
