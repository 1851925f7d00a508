import Crypto
import Foundation

/// The plain program's commands: list the targets, replay inputs, write seeds.
enum Command {
    static let usage = """
        usage: horizon-fuzz list
               horizon-fuzz replay TARGET PATH...   (files, or directories read recursively)
               horizon-fuzz seed TARGET DIR
        targets: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))
        """

    /// Runs a command; returns the exit status (0 done, 1 failed, 2 bad arguments).
    static func run(_ arguments: [String]) -> Int32 {
        guard let command = arguments.first else { return fail(usage, status: 2) }
        switch command {
        case "list":
            for target in FuzzTarget.allCases { print("\(target.rawValue)\t\(target.summary)") }
            return 0
        case "replay":
            guard arguments.count >= 3, let target = FuzzTarget(rawValue: arguments[1]) else {
                return fail(usage, status: 2)
            }
            return replay(target, paths: Array(arguments.dropFirst(2)))
        case "seed":
            guard arguments.count == 3, let target = FuzzTarget(rawValue: arguments[1]) else {
                return fail(usage, status: 2)
            }
            return seed(target, into: arguments[2])
        case "-h", "--help", "help":
            print(usage)
            return 0
        default:
            return fail(usage, status: 2)
        }
    }

    /// Every file under `paths`, in name order so a crash report names the same input each run.
    static func replay(_ target: FuzzTarget, paths: [String]) -> Int32 {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                return fail("horizon-fuzz: \(path) does not exist", status: 1)
            }
            if isDirectory.boolValue {
                let enumerator = FileManager.default.enumerator(atPath: path)
                while let name = enumerator?.nextObject() as? String {
                    let file = (path as NSString).appendingPathComponent(name)
                    var nested: ObjCBool = false
                    if FileManager.default.fileExists(atPath: file, isDirectory: &nested), !nested.boolValue {
                        files.append(file)
                    }
                }
            } else {
                files.append(path)
            }
        }
        var bytes = 0
        for file in files.sorted() {
            guard let data = FileManager.default.contents(atPath: file) else {
                return fail("horizon-fuzz: cannot read \(file)", status: 1)
            }
            bytes += data.count
            target.run(Array(data))
        }
        print("horizon-fuzz: replayed \(files.count) input(s), \(bytes) bytes, through \(target.rawValue): no finding")
        return 0
    }

    /// Writes the target's seeds, named like libFuzzer names corpus files (SHA-1 of the content)
    /// so a later merge recognises them.
    static func seed(_ target: FuzzTarget, into directory: String) -> Int32 {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let seeds = target.seeds()
            for seed in seeds {
                let name = Insecure.SHA1.hash(data: seed).map { String($0, radix: 16) }
                    .map { $0.count == 1 ? "0" + $0 : $0 }.joined()
                let url = URL(fileURLWithPath: directory).appendingPathComponent(name)
                try Data(seed).write(to: url)
                // A seed must itself pass, or the corpus would start with a finding.
                target.run(seed)
            }
            print("horizon-fuzz: wrote \(seeds.count) seed(s) for \(target.rawValue) to \(directory)")
            return 0
        } catch {
            return fail("horizon-fuzz: cannot write seeds to \(directory): \(error)", status: 1)
        }
    }

    static func fail(_ message: String, status: Int32) -> Int32 {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        return status
    }
}

/// Stops the run on a broken invariant with a message libFuzzer shows next to the input.
func finding(_ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    fatalError("horizon-fuzz finding: \(message())", file: file, line: line)
}

/// Reads an input front to back without ever trapping: past the end every read yields zeros or
/// nothing, so each target can take what it needs from any byte string.
struct InputCursor {
    let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Up to `count` bytes (fewer at the end).
    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + max(count, 0))
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    /// A length byte, then that many bytes: how the targets split an input into pieces.
    mutating func chunk() -> [UInt8] { take(Int(byte())) }

    mutating func rest() -> [UInt8] { take(bytes.count - offset) }
}

/// Writes pieces in `InputCursor.chunk` form, for seeds (pieces over 255 bytes are split).
func chunked(_ pieces: [[UInt8]]) -> [UInt8] {
    var bytes: [UInt8] = []
    for piece in pieces {
        var start = 0
        repeat {
            let end = min(piece.count, start + 255)
            bytes.append(UInt8(end - start))
            bytes += piece[start..<end]
            start = end
        } while start < piece.count
    }
    return bytes
}
