import Foundation
import HorizonLedger
import Testing

/// `horizon-server merchants time-zone`: the operator sets the days a merchant's dashboard
/// counts in; a zone the machine does not know is refused before anything is opened.
@Suite("Merchant time zone from the command line", .serialized, .offTheCooperativePool)
struct MerchantTimeZoneProgramTests {
    @Test func anOperatorSetsAMerchantsTimeZone() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let passwordFile = sandbox.path("password")
        try "correct horse battery\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let added = try ServerProcess.run([
            "merchants", "add", "Corner Bakery", "--email", "owner@bakery.example", "--currency", "EUR",
            "--password-file", passwordFile, "--data-dir", data,
        ])
        #expect(added.status == 0, "\(added.errors)")

        let set = try ServerProcess.run([
            "merchants", "time-zone", "owner@bakery.example", "Europe/Berlin", "--data-dir", data,
        ])
        #expect(set.status == 0, "\(set.errors)")
        #expect(set.output.contains("counts its days in Europe/Berlin"), "\(set.output)")
        let unknown = try ServerProcess.run([
            "merchants", "time-zone", "owner@bakery.example", "Mars/Olympus", "--data-dir", data,
        ])
        #expect(unknown.status == 2)
        #expect(unknown.errors.contains("Mars/Olympus is not a time zone this machine knows"), "\(unknown.errors)")
        let nobody = try ServerProcess.run(["merchants", "time-zone", "nobody@example.com", "UTC", "--data-dir", data])
        #expect(nobody.status != 0 && nobody.errors.contains("no merchant nobody@example.com here"), "\(nobody.errors)")

        let ledger = try await Ledger.sqlite(path: sandbox.path("server/horizon.sqlite"))
        #expect(try await ledger.merchant(adminEmail: "owner@bakery.example")?.timeZone == "Europe/Berlin")
        await ledger.close()
    }
}
