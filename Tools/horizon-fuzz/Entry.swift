// horizon-fuzz: libFuzzer targets for the wire decoders.
//
// Built normally it is a small program that replays inputs through the same entry functions
// libFuzzer calls, so a corpus (or a crash file) can be checked in a plain debug build and in
// the tests:
//
//     horizon-fuzz list                           the targets
//     horizon-fuzz replay TARGET PATH...          run every file under PATH through TARGET
//     horizon-fuzz seed TARGET DIR                write seed inputs made from real encodings
//
// Built with `-Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING` (Tools/fuzz.sh does this)
// it is a libFuzzer binary: HORIZON_FUZZ_TARGET names the target, every other argument is
// libFuzzer's own (corpus directories, -max_total_time=600, -merge=1, a crash file to rerun).
//
// An input a decoder refuses is fine; a trap, a sanitizer report, a hang or a broken invariant
// (a failed round trip, an accepted tampered handshake) is a finding.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The decoders under test, each with its own input layout (see the target's file).
enum FuzzTarget: String, CaseIterable, Sendable {
    case frame
    case message
    case advertisement
    case handshake

    /// Runs one input. Returns normally for accepted and refused inputs alike; traps on a finding.
    func run(_ input: [UInt8]) {
        switch self {
        case .frame: FrameFuzz.run(input)
        case .message: MessageFuzz.run(input)
        case .advertisement: AdvertisementFuzz.run(input)
        case .handshake: HandshakeFuzz.run(input)
        }
    }

    /// Seed inputs made from real encodings, so the fuzzer starts inside the formats.
    func seeds() -> [[UInt8]] {
        switch self {
        case .frame: FrameFuzz.seeds()
        case .message: MessageFuzz.seeds()
        case .advertisement: AdvertisementFuzz.seeds()
        case .handshake: HandshakeFuzz.seeds()
        }
    }

    var summary: String {
        switch self {
        case .frame: "link fragments through the Reassembler and a MessageLink"
        case .message: "every SessionMessage decoder, with the decode-encode round trip"
        case .advertisement: "AD structures, the manufacturer payload and HorizonAdvertisement"
        case .handshake: "ClientHello/ServerHello, credentials and SecureLink on both sides"
        }
    }
}

#if FUZZING
    /// The target libFuzzer drives, chosen once per process from HORIZON_FUZZ_TARGET.
    let selectedTarget: FuzzTarget = {
        let name = getenv("HORIZON_FUZZ_TARGET").map { String(cString: $0) } ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
            print("horizon-fuzz: set HORIZON_FUZZ_TARGET to one of \(names)")
            exit(2)
        }
        return target
    }()

    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
        let input = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
        selectedTarget.run(input)
        return 0
    }

    /// libFuzzer's documented entry for programs that keep their own `main` (SwiftPM links Swift
    /// executables with its own `main`), declared here because no C header reaches Swift.
    @_silgen_name("LLVMFuzzerRunDriver")
    func llvmFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt
#endif

@main
struct HorizonFuzz {
    static func main() {
        #if FUZZING
            _ = selectedTarget
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(llvmFuzzerRunDriver(&argc, &argv, fuzzTestOneInput))
        #else
            exit(Command.run(Array(CommandLine.arguments.dropFirst())))
        #endif
    }
}
