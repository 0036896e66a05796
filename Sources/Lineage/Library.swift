import Foundation
import GRDB

/// The photo-library index for suggestions: what each file is and when it was captured,
/// remembered by (path, size, mtime) so a rescan reads only what changed. `<state>/library-index.db`
/// can be deleted at any time; it is rebuilt by the next scan.
public final class LibraryIndex: @unchecked Sendable {
    public struct Entry: Sendable, Equatable {
        public var path: String
        public var size: Int64
        public var mtime: Double
        /// "photo", "video" or "motion_photo" (an Android photo with its movie inside); nil when
        /// the file could not be read.
        public var kind: String?
        public var local: String?
        public var offsetMinutes: Int?
        public var dateSource: String?
        public var contentIdentifier: String?
        public var error: String?
        public var sha256: String?
        /// A movie's length in seconds, when its container states it.
        public var seconds: Double?
        public init(path: String, size: Int64, mtime: Double, kind: String?, local: String?, offsetMinutes: Int?, dateSource: String?,
                    contentIdentifier: String?, error: String?, sha256: String? = nil, seconds: Double? = nil) {
            self.path = path; self.size = size; self.mtime = mtime; self.kind = kind; self.local = local; self.offsetMinutes = offsetMinutes
            self.dateSource = dateSource; self.contentIdentifier = contentIdentifier; self.error = error; self.sha256 = sha256
            self.seconds = seconds
        }
    }

    public let path: String
    let db: DatabaseQueue

    public init(path: String) throws {
        self.path = path
        var config = Configuration()
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL") }
        db = try DatabaseQueue(path: path, configuration: config)
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE asset (
                    path TEXT PRIMARY KEY,
                    library TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    mtime REAL NOT NULL,
                    kind TEXT,                 -- photo | video; NULL: unreadable
                    local TEXT,                -- capture time where taken, YYYY-MM-DDTHH:MM:SS[.fff]
                    offset_min INTEGER,
                    date_source TEXT,          -- exif | quicktime.creationdate | creation_time
                    content_id TEXT,           -- Apple Live Photo content identifier
                    error TEXT,
                    sha256 TEXT                -- filled when first needed (dismissals)
                );
                CREATE INDEX asset_library ON asset(library);
                """)
        }
        // Movies' lengths (drafts fit their transitions to them): movies indexed before are read
        // again by the next scan.
        m.registerMigration("v2 seconds") { db in
            try db.execute(sql: """
                ALTER TABLE asset ADD COLUMN seconds REAL;
                UPDATE asset SET mtime = -1 WHERE kind = 'video';
                """)
        }
        // Android motion photos: JPEG photos indexed before are read again by the next scan.
        m.registerMigration("v3 motion photos") { db in
            try db.execute(sql: "UPDATE asset SET mtime = -1 WHERE kind = 'photo' AND (path LIKE '%.jpg' OR path LIKE '%.jpeg')")
        }
        try m.migrate(db)
    }

    /// (size, mtime) of every indexed file under `library`.
    public func known(library: String) throws -> [String: (size: Int64, mtime: Double)] {
        try db.read { db in
            var out: [String: (Int64, Double)] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT path, size, mtime FROM asset WHERE library = ?", arguments: [library])
            while let r = try rows.next() { out[r[0]] = (r[1], r[2]) }
            return out
        }
    }

    /// Records new or changed files and forgets those that are gone, in one transaction.
    public func update(library: String, upsert: [Entry], remove: [String]) throws {
        try db.write { db in
            for p in remove { try db.execute(sql: "DELETE FROM asset WHERE path = ?", arguments: [p]) }
            for e in upsert {
                try db.execute(sql: """
                    INSERT OR REPLACE INTO asset (path, library, size, mtime, kind, local, offset_min, date_source, content_id, error, sha256, seconds)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)
                    """, arguments: [e.path, library, e.size, e.mtime, e.kind, e.local, e.offsetMinutes, e.dateSource, e.contentIdentifier, e.error,
                                     e.seconds])
            }
        }
    }

    public func entries(library: String) throws -> [Entry] {
        try db.read { db in
            try Row.fetchAll(db, sql: """
                SELECT path, size, mtime, kind, local, offset_min, date_source, content_id, error, sha256, seconds
                FROM asset WHERE library = ? ORDER BY path
                """, arguments: [library]).map {
                Entry(path: $0[0], size: $0[1], mtime: $0[2], kind: $0[3], local: $0[4], offsetMinutes: $0[5], dateSource: $0[6],
                      contentIdentifier: $0[7], error: $0[8], sha256: $0[9], seconds: $0[10])
            }
        }
    }

    public func setHash(path: String, sha256: String) throws {
        try db.write { try $0.execute(sql: "UPDATE asset SET sha256 = ? WHERE path = ?", arguments: [sha256, path]) }
    }
}

/// The person's decisions about suggestions, kept apart from the index (deleting or rebuilding
/// the index never loses them): which libraries are opted in (and to memories), pauses, blocks
/// and dismissals. `<state>/suggestions.db`.
public final class SuggestionSettings: @unchecked Sendable {
    public struct Library: Sendable, Equatable {
        public var path: String
        public var memories: Bool
        public var paused: Bool
    }
    public struct Block: Sendable, Equatable {
        public var library: String
        /// "days", "folder" or "asset".
        public var kind: String
        public var from: String?
        public var to: String?
        public var path: String?
        public init(library: String, kind: String, from: String? = nil, to: String? = nil, path: String? = nil) {
            self.library = library; self.kind = kind; self.from = from; self.to = to; self.path = path
        }
    }

    let db: DatabaseQueue

    public init(path: String) throws {
        var config = Configuration()
        config.busyMode = .timeout(10)
        db = try DatabaseQueue(path: path, configuration: config)
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE library (path TEXT PRIMARY KEY, memories INTEGER NOT NULL, paused INTEGER NOT NULL DEFAULT 0, enabled_at REAL NOT NULL);
                CREATE TABLE setting (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE block (library TEXT NOT NULL, kind TEXT NOT NULL, from_day TEXT, to_day TEXT, path TEXT,
                                    UNIQUE (library, kind, from_day, to_day, path));
                CREATE TABLE dismissal (id TEXT PRIMARY KEY, items_hash TEXT NOT NULL, at REAL NOT NULL);
                -- What the last `coord suggest list` showed, so `dismiss ID` knows which items it hides.
                CREATE TABLE listed (id TEXT PRIMARY KEY, items_hash TEXT NOT NULL, library TEXT NOT NULL);
                """)
        }
        try m.migrate(db)
    }

    public func library(_ path: String) throws -> Library? {
        try db.read { db in
            try Row.fetchOne(db, sql: "SELECT path, memories, paused FROM library WHERE path = ?", arguments: [path])
                .map { Library(path: $0[0], memories: $0[1], paused: $0[2]) }
        }
    }
    public func enable(_ path: String, memories: Bool, now: Double) throws {
        try db.write { try $0.execute(sql: """
            INSERT INTO library (path, memories, paused, enabled_at) VALUES (?, ?, 0, ?)
            ON CONFLICT(path) DO UPDATE SET memories = excluded.memories
            """, arguments: [path, memories, now]) }
    }
    public func disable(_ path: String) throws -> Bool {
        try db.write { db in
            try db.execute(sql: "DELETE FROM library WHERE path = ?", arguments: [path])
            return db.changesCount > 0
        }
    }
    /// Pauses or resumes one library, or (nil) all suggestions.
    public func setPaused(_ path: String?, _ paused: Bool) throws -> Bool {
        try db.write { db in
            if let path {
                try db.execute(sql: "UPDATE library SET paused = ? WHERE path = ?", arguments: [paused, path])
                return db.changesCount > 0
            }
            try db.execute(sql: "INSERT OR REPLACE INTO setting (key, value) VALUES ('paused', ?)", arguments: [paused ? "1" : "0"])
            return true
        }
    }
    public func pausedEverywhere() throws -> Bool {
        try db.read { try String.fetchOne($0, sql: "SELECT value FROM setting WHERE key = 'paused'") == "1" }
    }

    public func addBlock(_ b: Block) throws {
        try db.write { try $0.execute(sql: "INSERT OR IGNORE INTO block (library, kind, from_day, to_day, path) VALUES (?, ?, ?, ?, ?)",
                                      arguments: [b.library, b.kind, b.from, b.to, b.path]) }
    }
    public func removeBlock(_ b: Block) throws -> Bool {
        try db.write { db in
            try db.execute(sql: "DELETE FROM block WHERE library = ? AND kind = ? AND from_day IS ? AND to_day IS ? AND path IS ?",
                           arguments: [b.library, b.kind, b.from, b.to, b.path])
            return db.changesCount > 0
        }
    }
    public func blocks(library: String) throws -> [Block] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT library, kind, from_day, to_day, path FROM block WHERE library = ? ORDER BY rowid", arguments: [library])
                .map { Block(library: $0[0], kind: $0[1], from: $0[2], to: $0[3], path: $0[4]) }
        }
    }

    public func dismiss(id: String, itemsHash: String, now: Double) throws {
        try db.write { try $0.execute(sql: "INSERT OR REPLACE INTO dismissal (id, items_hash, at) VALUES (?, ?, ?)", arguments: [id, itemsHash, now]) }
    }
    public func recordListed(_ listed: [(id: String, itemsHash: String, library: String)]) throws {
        try db.write { db in
            for l in listed {
                try db.execute(sql: "INSERT OR REPLACE INTO listed (id, items_hash, library) VALUES (?, ?, ?)", arguments: [l.id, l.itemsHash, l.library])
            }
        }
    }
    public func listedHash(id: String) throws -> String? {
        try db.read { try String.fetchOne($0, sql: "SELECT items_hash FROM listed WHERE id = ?", arguments: [id]) }
    }
    public func dismissals() throws -> [String: String] {
        try db.read { db in
            Dictionary(try Row.fetchAll(db, sql: "SELECT id, items_hash FROM dismissal").map { ($0[0] as String, $0[1] as String) },
                       uniquingKeysWith: { a, _ in a })
        }
    }
}
