import Foundation
import HorizonLedger
import Testing

@Suite("PostgreSQL's programs")
struct PostgresProgramsTests {
    /// Versions are numbers: with 9.6, 15 and 16 installed, 16's program is taken (compared as
    /// text, "9.6" would sort above "16").
    @Test func theNewestInstalledVersionIsChosenByNumberNotByText() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("pg-programs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        do {
            for version in ["9.6", "15", "16"] {
                let bin = root.appendingPathComponent("\(version)/bin")
                try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
                let program = bin.appendingPathComponent("pg_dump").path
                #expect(FileManager.default.createFile(atPath: program, contents: Data("#!/bin/sh\n".utf8)))
                try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: program)
            }
            #expect(PostgresPrograms.path(of: "pg_dump", under: root.path) == root.path + "/16/bin/pg_dump")
            // A version whose program is missing or not executable is passed over.
            try FileManager.default.setAttributes(
                [.posixPermissions: 0o644], ofItemAtPath: root.path + "/16/bin/pg_dump")
            #expect(PostgresPrograms.path(of: "pg_dump", under: root.path) == root.path + "/15/bin/pg_dump")
            #expect(PostgresPrograms.path(of: "no-such-program", under: root.path) == nil)
        }
    }
}
