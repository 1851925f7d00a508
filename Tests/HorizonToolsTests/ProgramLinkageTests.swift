import Foundation
import HorizonTestSupport
import Testing

/// What each built program carries: the server links no radio stack (no libbluetooth, no libdbus,
/// none of the BlueZ, D-Bus or roles modules), while the terminal and the wallet do, so the checks
/// are not vacuous. Crash points are in debug builds only.
@Suite("The programs link what their job needs", .offTheCooperativePool)
struct ProgramLinkageTests {
    /// Standard output of `tool arguments…`, which must succeed.
    static func output(_ tool: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Read before waiting: nm's output is far larger than a pipe's buffer.
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(tool) \(arguments.joined(separator: " ")) failed")
        return String(decoding: data, as: UTF8.self)
    }

    /// The shared libraries `program` loads, as `ldd` names them.
    static func sharedLibraries(_ program: String) throws -> [String] {
        try output("ldd", [Programs.url(program).path]).split(separator: "\n")
            .compactMap { $0.split(whereSeparator: \.isWhitespace).first.map(String.init) }
    }

    /// Whether `program` holds code of the Swift module `module` (its mangled symbol prefix).
    static func holdsModule(_ program: String, _ module: String) throws -> Bool {
        try output("nm", ["--defined-only", Programs.url(program).path]).contains("$s\(module.count)\(module)")
    }

    static let radioLibraries = ["libbluetooth", "libdbus-1"]
    static let radioModules = ["HorizonBlueZ", "HorizonDBus", "HorizonRoles"]

    @Test("horizon-server loads neither libbluetooth nor libdbus")
    func serverLinksNoRadioLibrary() throws {
        let libraries = try Self.sharedLibraries("horizon-server")
        #expect(!libraries.isEmpty, "ldd listed nothing for horizon-server")
        for library in Self.radioLibraries {
            #expect(!libraries.contains { $0.hasPrefix(library) }, "horizon-server loads \(library): \(libraries)")
        }
    }

    @Test("horizon-server holds no BlueZ, D-Bus or roles code")
    func serverHoldsNoRadioModule() throws {
        for module in Self.radioModules {
            #expect(try !Self.holdsModule("horizon-server", module), "horizon-server holds \(module)")
        }
    }

    @Test(
        "the terminal and the wallet do load libbluetooth and libdbus, and hold the roles",
        arguments: [
            "horizon-terminal", "horizon-wallet",
        ])
    func radioProgramsLinkTheRadio(program: String) throws {
        let libraries = try Self.sharedLibraries(program)
        for library in Self.radioLibraries {
            #expect(libraries.contains { $0.hasPrefix(library) }, "\(program) does not load \(library): \(libraries)")
        }
        for module in Self.radioModules {
            #expect(try Self.holdsModule(program, module), "\(program) holds no \(module)")
        }
    }

    /// The crash points are defined for the debug configuration only, so a release build has
    /// none (`strings horizon-server | grep HORIZON_SERVER_CRASH` finds nothing there); the tests'
    /// debug build has them, which the crash tests need.
    @Test("fault injection is compiled into debug builds only")
    func faultInjectionIsDebugOnly() throws {
        let manifest = try RepositoryFile.text("Package.swift")
        let defines = manifest.matches(of: /\.define\("HORIZON_FAULT_INJECTION"[^)]*\)/).map { String($0.output) }
        #expect(defines == [#".define("HORIZON_FAULT_INJECTION", .when(configuration: .debug)"#])
        for path in ["Sources/HorizonServer/FaultInjection.swift", "Tools/HorizonRadioCLISupport/CrashInjection.swift"]
        {
            let source = try RepositoryFile.text(path)
            let start = try #require(source.firstRange(of: "#if HORIZON_FAULT_INJECTION"), "\(path) is not conditional")
            let end = try #require(source[start.upperBound...].firstRange(of: /\n#(else|endif)/))
            let outside = source[..<start.lowerBound] + source[end.lowerBound...]
            for variable in ["HORIZON_SERVER_CRASH", "HORIZON_SERVER_DELAY_MS", "HORIZON_CRASH_AFTER"] {
                #expect(!outside.contains(variable), "\(path) reads \(variable) in release builds too")
            }
        }
        let server = try Self.output("strings", [Programs.url("horizon-server").path])
        #expect(server.contains("HORIZON_SERVER_CRASH"), "the debug horizon-server has no crash points")
        let terminal = try Self.output("strings", [Programs.url("horizon-terminal").path])
        #expect(terminal.contains("HORIZON_CRASH_AFTER"), "the debug horizon-terminal has no crash points")
    }
}
