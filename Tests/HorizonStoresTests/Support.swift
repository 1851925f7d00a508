import Foundation
import HorizonCore
import HorizonProtocol
import HorizonStores
import Testing

/// Runs `body` with a fresh, empty directory under the system's temporary directory and removes
/// it (and everything in it) afterwards, whatever `body` does. Databases opened inside `body`
/// should not outlive it.
func withTemporaryDirectory<T>(_ body: (URL) throws -> T) throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "horizon-stores-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// The path of the ledger file inside `directory`.
func ledgerPath(in directory: URL) -> String { directory.appendingPathComponent("ledger.sqlite").path }

/// The time every test settles at, a Unix time in 2027.
let settleTime: UnixTime = 1_800_000_000

/// The `DatabaseError` that `body` throws, or nil (recording an issue) if it throws none.
func databaseError(
    _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) -> DatabaseError? {
    do {
        try body()
        Issue.record("expected a DatabaseError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as DatabaseError {
        return error
    } catch {
        Issue.record("expected a DatabaseError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Expects `body` to throw a `DatabaseError` with exactly these fields.
func expectDatabaseError(
    code: Int32, message: String, context: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    let error = databaseError(body, sourceLocation: sourceLocation)
    #expect(error?.code == code, sourceLocation: sourceLocation)
    #expect(error?.message == message, sourceLocation: sourceLocation)
    #expect(error?.context == context, sourceLocation: sourceLocation)
    #expect(error?.description == "\(context): \(message) (SQLite \(code))", sourceLocation: sourceLocation)
}
