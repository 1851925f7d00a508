import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a secret (a password, a PIN) from its file option if given, else from the terminal with
/// echo off, else (standard input not a terminal) one line of standard input. A trailing
/// newline is dropped; nothing else is trimmed, since spaces may be part of a password.
/// `what` and `fileOption` name the secret and its option in messages.
public func readSecret(
    prompt: String, file: String?, what: String = "password", fileOption: String = "--password-file"
) throws -> String {
    if let file {
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw CLIError("cannot read the \(what) file \(file): \(error.localizedDescription)")
        }
        let secret = text.hasSuffix("\n") ? String(text.dropLast()) : text
        guard !secret.isEmpty else { throw CLIError("the \(what) file \(file) is empty") }
        return secret
    }
    let interactive = isatty(STDIN_FILENO) == 1
    var saved = termios()
    if interactive {
        FileHandle.standardError.write(Data(prompt.utf8))
        tcgetattr(STDIN_FILENO, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
    }
    defer {
        if interactive {
            tcsetattr(STDIN_FILENO, TCSANOW, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
    }
    guard let line = Swift.readLine(strippingNewline: true), !line.isEmpty else {
        throw CLIError("no \(what) given (type it at the prompt, or pass \(fileOption))")
    }
    return line
}

/// A secret about to be set: from its file option if given; typed at a terminal, asked twice
/// (without echo) and refused when the two differ, since a typo would lock its owner out; else
/// (standard input not a terminal: a script or a pipe) one line of standard input.
public func readNewSecret(
    prompt: String, repeatPrompt: String, file: String?, what: String = "password",
    fileOption: String = "--password-file"
) throws -> String {
    let secret = try readSecret(prompt: prompt, file: file, what: what, fileOption: fileOption)
    guard file == nil, isatty(STDIN_FILENO) == 1 else { return secret }
    guard try readSecret(prompt: repeatPrompt, file: nil, what: what, fileOption: fileOption) == secret else {
        throw CLIError("the two \(what)s typed differ; nothing was changed")
    }
    return secret
}
