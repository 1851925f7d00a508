import HorizonBlueZ
import HorizonCLISupport
import HorizonRadio

/// What a person at the command line can do about an error bluetoothd answered, chosen by its
/// kind: the BlueZ radio's errors say what went wrong and keep BlueZ's error name, the advice is
/// the programs' (it names commands and files of this installation).
public enum BlueZAdvice {
    /// What to do about an error of `kind`; nil where there is nothing to add.
    public static func advice(for kind: BlueZError.Kind) -> String? {
        switch kind {
        case .noServer: "start it (systemctl start dbus) before bluetoothd"
        case .noReply: "is it stuck?"
        case .inProgress: "retry"
        case .notPermitted: "install udev/org.horizon.Terminal.conf and run as a member of 'bluetooth'"
        default: nil
        }
    }

    /// `error` with the advice for its BlueZ error kind, or nil when it is no BlueZ error with advice.
    public static func sentence(for error: RadioError) -> String? {
        guard case .backend(let name, let message) = error,
            let advice = advice(for: BlueZError.Kind(errorName: name))
        else { return nil }
        return "\(message); \(advice) (\(name))"
    }

    /// `error` for a person at this terminal or wallet: its `cliMessage`, with the advice for a
    /// BlueZ error's kind.
    public static func cliMessage(for error: RadioError) -> String { sentence(for: error) ?? error.cliMessage }
}
